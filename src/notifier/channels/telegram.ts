import type { ChannelMessage } from './message.ts';
import { clip, joinUrl, jsonPost, type ChannelFormat, type OpenConfig } from './request.ts';

export const TELEGRAM_API = 'https://api.telegram.org';

/** `sendMessage`'s parameters: plain text (no parse mode, so nothing in a name needs escaping), the link on its own line. */
export function telegramPayload(m: ChannelMessage, config: OpenConfig) {
  const chat = config.chat_id!;
  return {
    chat_id: /^-?\d+$/.test(chat) ? Number(chat) : chat,
    text: clip(`${m.line}\n${m.link}`, 4096),
    link_preview_options: { is_disabled: true },
  };
}

/** Bot API `sendMessage`: `{api_url}/bot<token>/sendMessage`. */
export const telegram: ChannelFormat = (m, config) =>
  [jsonPost(joinUrl(config.api_url ?? TELEGRAM_API, `/bot${config.bot_token}/sendMessage`), telegramPayload(m, config))];
