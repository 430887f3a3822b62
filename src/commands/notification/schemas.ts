import { agree, Int, Nullable, OneOf, Str, Type, type Disagreeing } from '../../events/schema-kit.ts';

const delivery = Type.Object({
  notification_id: Str(),
  event: OneOf(['task.failed', 'task.recovered', 'schedule.failed', 'schedule.recovered', 'monitor.down', 'monitor.recovered', 'endpoint.failed', 'endpoint.recovered'] as const),
  source: Type.Object({ type: OneOf(['task', 'schedule', 'monitor', 'endpoint'] as const), id: Str(), name: Str() }),
  execution_id: Nullable(Str('The execution that caused it; null for monitors')),
  channel: OneOf(['org_webhook', 'source_webhook', 'email'] as const),
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
