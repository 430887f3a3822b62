import type { ChannelMessage } from './message.ts';

/** What one delivery to a channel sends: HTTP requests (in order), a signed webhook, or an email. */
export type ChannelRequest =
  | { type: 'http'; method: 'POST'; url: string; headers: Record<string, string>; body: string }
  /** The organization webhook's payload and signing (kind `webhook`): the sender signs it. */
  | { type: 'signed'; url: string; body: string }
  | { type: 'email'; to: string; subject: string; text: string };

/** A channel's config with its secrets opened: what a format reads. */
export type OpenConfig = Record<string, string>;

/** One vendor's format: the requests a message makes for a channel of that kind. */
export type ChannelFormat = (message: ChannelMessage, config: OpenConfig) => ChannelRequest[];

/** `base` (an `api_url`, a `server_url`) before `path`: a trailing slash of the base is dropped. */
export const joinUrl = (base: string, path: string) => `${base.replace(/\/+$/, '')}${path}`;

export const jsonPost = (url: string, body: unknown, headers: Record<string, string> = {}): ChannelRequest =>
  ({ type: 'http', method: 'POST', url, headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** At most `max` characters, an ellipsis marking a cut. */
export const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);
