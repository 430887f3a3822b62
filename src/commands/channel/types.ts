import type { Envelope } from '../envelope.ts';
import type { SealedSecrets } from '../../lib/sealed-secrets.ts';
import type { NotificationEventName } from '../notification/types.ts';
import type { ChannelKind, ConfigInput } from './kinds.ts';

/** One notification channel of an organization (`chn_…`). */
export interface Channel {
  id: string;
  org_id: string;
  kind: ChannelKind;
  name: string;
  /** The config values stored in the clear (defaults filled in). */
  config: Record<string, string>;
  /** The secret values' names and masks (`***abcd`): what responses show of them. */
  secrets: Record<string, string>;
  /** The secret values, sealed as endpoint secrets are (`src/nats/secret-box.ts`). */
  sealed_secrets: SealedSecrets | null;
  /** The notification events it hears; null = every one, today's and any added later. */
  events: NotificationEventName[] | null;
  created_at: string;
  updated_at: string;
}

/**
 * The aggregate: an organization's channels, on one subject (`evt.<org>.channels`).
 * Every event carries the whole set after it, so whoever needs an organization's
 * channels (the notifier, on every transition) loads them with one direct get.
 * `version` counts the set's events: of two copies, the higher is the newer.
 */
export interface ChannelSet {
  org_id: string;
  channels: Channel[];
  version: number;
}

/** What a create or update sends; `config` holds secrets in the clear, which only the command carries. */
export interface ChannelInput {
  kind?: ChannelKind;
  name?: string;
  config?: ConfigInput;
  events?: NotificationEventName[] | null;
}

/**
 * The secret values after a change, as the handler sealed them (a decider cannot
 * seal: that needs the key and randomness): every secret of the channel, not only
 * the ones the command gave, with their masks.
 */
export interface SealedConfig {
  sealed: SealedSecrets | null;
  masks: Record<string, string>;
}

export type ChannelCommand =
  | { type: 'CreateChannel'; orgId: string; input: ChannelInput & { kind: ChannelKind; name: string; config: ConfigInput }; secrets: SealedConfig }
  | { type: 'UpdateChannel'; id: string; input: ChannelInput; secrets: SealedConfig }
  | { type: 'DeleteChannel'; id: string };

export type ChannelEvent =
  | Envelope<'ChannelCreated', { channel: Channel; set: ChannelSet }>
  | Envelope<'ChannelUpdated', { channel: Channel; changed: string[]; set: ChannelSet }>
  | Envelope<'ChannelDeleted', { channel: Channel; set: ChannelSet }>;

/** What a delivery to a channel ended with: `last_delivery` in responses. */
export interface ChannelDelivery {
  at: string;
  ok: boolean;
  status_code: number | null;
  error: string | null;
}

/**
 * A test message sent from `POST /channels/{id}/test`, recorded on the subject of its
 * notification id (`evt.<org>.notify.<ntf>`) like a notification's deliveries.
 */
export type ChannelTestEvent = Envelope<'ChannelTested', { notification_id: string; channel: { id: string; kind: ChannelKind; name: string }; delivery: ChannelDelivery }>;

/** An organization's channels at most: every notification fans out to them. */
export const MAX_CHANNELS = 100;
/** A resource's `channels` list at most. */
export const MAX_RESOURCE_CHANNELS = MAX_CHANNELS;
export const CHANNEL_ID_PATTERN = '^chn_[0-9a-z]{10,40}$';
