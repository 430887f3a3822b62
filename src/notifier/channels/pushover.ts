import type { ChannelMessage } from './message.ts';
import { clip, joinUrl, type ChannelFormat, type OpenConfig } from './request.ts';

export const PUSHOVER_API = 'https://api.pushover.net';

/** The messages API's parameters: failures at priority 1 (past quiet hours), the rest 0; the resource's page as `url`. */
export function pushoverParams(m: ChannelMessage, config: OpenConfig): Record<string, string> {
  return {
    token: config.app_token!,
    user: config.user_key!,
    title: clip(m.title, 250),
    message: clip(m.line, 1024),
    url: clip(m.link, 512),
    url_title: 'Open in jetcron',
    priority: m.severity === 'failure' ? '1' : '0',
    timestamp: String(Math.floor(Date.parse(m.at) / 1000)),
  };
}

/** `POST {api_url}/1/messages.json`, form-encoded as Pushover documents it. */
export const pushover: ChannelFormat = (m, config) => [{
  type: 'http', method: 'POST', url: joinUrl(config.api_url ?? PUSHOVER_API, '/1/messages.json'),
  headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(pushoverParams(m, config)).toString(),
}];
