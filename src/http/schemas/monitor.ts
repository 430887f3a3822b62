import { channelsSchema } from './channel.ts';
import { GRACE_SECONDS, INTERVAL_SECONDS } from '../../commands/monitor/decide.ts';
import { nameSchema, nullableUrl } from './common.ts';

export const slugSchema = { type: 'string', pattern: '^[a-z0-9_-]{1,100}$' } as const;
/** `max_duration_seconds`, `min_duration_seconds`: 1 s to a day. */
export const durationSchema = { type: 'integer', minimum: 1, maximum: 86400 } as const;
const nullable = <T extends { type: string }>(s: T) => ({ ...s, type: [s.type, 'null'] }) as const;

const monitorProperties = {
  name: nameSchema,
  schedule_type: { type: 'string', enum: ['interval', 'cron'] },
  interval_seconds: { type: ['integer', 'null'], ...INTERVAL_SECONDS },
  cron_expression: { type: ['string', 'null'], minLength: 1, maxLength: 255 },
  timezone: { type: 'string', minLength: 1, maxLength: 64 },
  grace_period_seconds: { type: 'integer', ...GRACE_SECONDS },
  max_duration_seconds: nullable(durationSchema),
  min_duration_seconds: nullable(durationSchema),
  slug: nullable(slugSchema),
  enabled: { type: 'boolean' },
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
  channels: channelsSchema,
  on_failure_url: nullableUrl,
  on_recovery_url: nullableUrl,
} as const;

export const createMonitorSchema = {
  $id: 'CreateMonitor',
  type: 'object',
  required: ['name', 'schedule_type'],
  additionalProperties: false,
  properties: monitorProperties,
} as const;

export const updateMonitorSchema = {
  $id: 'UpdateMonitor',
  type: 'object',
  additionalProperties: false,
  properties: monitorProperties,
} as const;
