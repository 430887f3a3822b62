import type { ChannelMessage } from './message.ts';
import { joinUrl, jsonPost, type ChannelFormat } from './request.ts';

const PRIORITY = { failure: 8, recovery: 5, info: 2 } as const;

/** A Gotify message: title, the line, a priority, and the resource's page opened on a click. */
export const gotifyPayload = (m: ChannelMessage) => ({
  title: m.title,
  message: m.line,
  priority: PRIORITY[m.severity],
  extras: { 'client::notification': { click: { url: m.link } } },
});

/** `POST {server_url}/message` with the application token in `X-Gotify-Key`. */
export const gotify: ChannelFormat = (m, config) => [jsonPost(joinUrl(config.server_url!, '/message'), gotifyPayload(m), { 'X-Gotify-Key': config.app_token! })];
