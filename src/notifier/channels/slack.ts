import type { ChannelMessage } from './message.ts';
import { clip, jsonPost, type ChannelFormat } from './request.ts';

/** Slack's mrkdwn treats these three as control characters: a resource's name must not become a link or a mention. */
const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * An incoming-webhook message: `text` (what notifications and clients without blocks
 * show) and the same in Block Kit, a section with the line and a context with the link.
 */
export function slackPayload(m: ChannelMessage) {
  return {
    text: m.line,
    blocks: [
      { type: 'section' as const, text: { type: 'mrkdwn' as const, text: clip(`*${escape(m.title)}*\n${escape(m.line)}`, 3000) } },
      { type: 'context' as const, elements: [{ type: 'mrkdwn' as const, text: `<${m.link}|Open in jetcron> · ${escape(m.event)}` }] },
    ],
  };
}

export const slack: ChannelFormat = (m, config) => [jsonPost(config.webhook_url!, slackPayload(m))];
