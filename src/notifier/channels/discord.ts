import type { ChannelMessage } from './message.ts';
import { clip, jsonPost, type ChannelFormat } from './request.ts';

const COLOURS = { failure: 0xd93f0b, recovery: 0x2da44e, info: 0x0969da } as const;

/**
 * An execute-webhook body: `content` (the line) and one embed linking to the resource.
 * `allowed_mentions` with nothing to parse: a name such as `@everyone` pings no one.
 */
export function discordPayload(m: ChannelMessage) {
  const fields = [
    { name: 'Event', value: m.event, inline: true },
    ...(m.status_code !== null ? [{ name: 'Status code', value: String(m.status_code), inline: true }] : []),
    ...(m.down_reason ? [{ name: 'Down reason', value: m.down_reason, inline: true }] : []),
  ];
  return {
    content: clip(m.line, 2000),
    embeds: [{ title: clip(m.title, 256), description: clip(m.line, 4096), url: m.link, color: COLOURS[m.severity], timestamp: m.at, fields }],
    allowed_mentions: { parse: [] as never[] },
  };
}

export const discord: ChannelFormat = (m, config) => [jsonPost(config.webhook_url!, discordPayload(m))];
