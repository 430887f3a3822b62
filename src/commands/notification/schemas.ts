import { agree, Int, Nullable, OneOf, Opt, Str, Type, type Disagreeing } from '../schema-kit.ts';

/** Every notification event name (the order of the type's union). */
export const NOTIFICATION_EVENT_NAMES = [
  'task.failed', 'task.recovered', 'schedule.failed', 'schedule.recovered', 'schedule.disabled',
  'monitor.down', 'monitor.recovered', 'endpoint.failed', 'endpoint.recovered', 'endpoint.disabled',
] as const;

const delivery = Type.Object({
  notification_id: Str(),
  event: OneOf(NOTIFICATION_EVENT_NAMES),
  source: Type.Object({ type: OneOf(['task', 'schedule', 'monitor', 'endpoint'] as const), id: Str(), name: Str() }),
  execution_id: Nullable(Str('The execution that caused it; null for monitors')),
  channel: OneOf(['org_webhook', 'source_webhook', 'email', 'channel'] as const),
  channel_id: Opt(Str('`channel`: which one (`chn_…`)')),
  channel_kind: Opt(Str('`channel`: its kind')),
  target: Str('The URL, or the email address'),
  attempts: Int('Tries made, this one included'),
  status_code: Nullable(Int()),
  error_message: Nullable(Str()),
});

export const NOTIFICATION_EVENT_SCHEMAS = {
  NotificationSent: delivery,
  NotificationFailed: delivery,
};
agree<Disagreeing<typeof NOTIFICATION_EVENT_SCHEMAS>>();
