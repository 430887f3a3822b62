import type { Envelope } from '../../events/envelope.ts';

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
  | 'endpoint.recovered';

/**
 * Where one notification goes: the organization's webhook (`org_webhook`, chat-tool
 * friendly), the resource's own `on_failure_url`/`on_recovery_url` (`source_webhook`),
 * or the organization's `notification_email` (`email`).
 */
export type NotificationChannel = 'org_webhook' | 'source_webhook' | 'email';

export interface NotificationDelivery {
  notification_id: string;
  event: NotificationEventName;
  source: { type: NotifySourceType; id: string; name: string };
  /** The execution that caused it; null for monitors. */
  execution_id: string | null;
  channel: NotificationChannel;
  /** The URL, or the email address. */
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
