import type { Envelope } from '../envelope.ts';

/** What a notification is about. Only tasks notify today; the others reuse the same shapes. */
export type NotifySourceType = 'task' | 'schedule' | 'monitor' | 'endpoint';

/** `task.failed`, `task.recovered`, …; monitors say `monitor.down` instead of `.failed`. */
export type NotificationEventName =
  | 'task.failed'
  | 'task.recovered'
  | 'schedule.failed'
  | 'schedule.recovered'
  | 'monitor.down'
  | 'monitor.recovered'
  | 'endpoint.failed'
  | 'endpoint.recovered'
  // Destination health (the contract's "auto-disable"): a schedule, or one forward URL of
  // an endpoint, disabled after failing for long enough. Channels take them today; what
  // decides them is not built yet.
  | 'schedule.disabled'
  | 'endpoint.disabled';

/** Every notification event, in the order the API and the console list them. */
export const NOTIFICATION_EVENTS: readonly NotificationEventName[] = [
  'task.failed', 'task.recovered', 'schedule.failed', 'schedule.recovered', 'schedule.disabled',
  'monitor.down', 'monitor.recovered', 'endpoint.failed', 'endpoint.recovered', 'endpoint.disabled',
];

/**
 * Where one notification goes: the organization's webhook (`org_webhook`, chat-tool
 * friendly), the resource's own `on_failure_url`/`on_recovery_url` (`source_webhook`),
 * or the organization's `notification_email` (`email`), or one of the organization's
 * notification channels (`channel`, with its `channel_id`).
 */
export type NotificationChannel = 'org_webhook' | 'source_webhook' | 'email' | 'channel';

export interface NotificationDelivery {
  notification_id: string;
  event: NotificationEventName;
  source: { type: NotifySourceType; id: string; name: string };
  /** The execution that caused it; null for monitors. */
  execution_id: string | null;
  channel: NotificationChannel;
  /** `channel`: which one (`chn_…`) and its kind. */
  channel_id?: string;
  channel_kind?: string;
  /** The URL, or the email address; for a channel its kind and id (its URLs may be secrets). */
  target: string;
  /** Tries made, this one included. */
  attempts: number;
  /** HTTP status of the last try (webhooks); null for email or no answer. */
  status_code: number | null;
  error_message: string | null;
}

// Recorded on `evt.<org>.notify.<notification id>`, one event per channel.
export type NotificationEvent =
  | Envelope<'NotificationSent', NotificationDelivery>
  | Envelope<'NotificationFailed', NotificationDelivery>;
