import type { ChannelMessage } from './message.ts';
import { jsonPost, type ChannelFormat } from './request.ts';

/** A Google Chat incoming-webhook message: `text`, with the link in Chat's `<url|text>` form. */
export const googleChatPayload = (m: ChannelMessage) => ({ text: `${m.line}\n<${m.link}|Open in jetcron>` });

export const googleChat: ChannelFormat = (m, config) => [jsonPost(config.webhook_url!, googleChatPayload(m), { 'Content-Type': 'application/json; charset=UTF-8' })];
