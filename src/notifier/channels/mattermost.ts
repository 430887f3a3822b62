import type { ChannelMessage } from './message.ts';
import { jsonPost, type ChannelFormat } from './request.ts';

/** An incoming-webhook message: `text` in Mattermost's Markdown, the line and a link to the resource. */
export const mattermostPayload = (m: ChannelMessage) => ({ text: `${m.line}\n[Open in jetcron](${m.link})` });

export const mattermost: ChannelFormat = (m, config) => [jsonPost(config.webhook_url!, mattermostPayload(m))];
