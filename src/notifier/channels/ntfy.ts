import type { ChannelMessage } from './message.ts';
import { joinUrl, type ChannelFormat } from './request.ts';

const TAGS = { failure: 'rotating_light', recovery: 'white_check_mark', info: 'information_source' } as const;

/** A header value in ASCII: other text as an RFC 2047 encoded word, which ntfy decodes. */
const headerText = (text: string) => (/^[\x20-\x7e]*$/.test(text) ? text : `=?UTF-8?B?${Buffer.from(text, 'utf8').toString('base64')}?=`);

/** ntfy's publish headers: `Title`, `Priority` (failures high, the rest default), `Tags`, `Click` (the resource's page). */
export function ntfyHeaders(m: ChannelMessage, token: string | undefined): Record<string, string> {
  return {
    'Content-Type': 'text/plain; charset=utf-8',
    Title: headerText(m.title),
    Priority: m.severity === 'failure' ? 'high' : 'default',
    Tags: `${TAGS[m.severity]},${m.event}`,
    Click: m.link,
    ...(token ? { Authorization: `Bearer ${token}` } : {}),
  };
}

/** Publish: `POST {server_url}/{topic}`, the message as the body. */
export const ntfy: ChannelFormat = (m, config) =>
  [{ type: 'http', method: 'POST', url: joinUrl(config.server_url!, `/${config.topic}`), headers: ntfyHeaders(m, config.token), body: m.line }];
