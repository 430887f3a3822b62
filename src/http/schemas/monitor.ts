import { nullableUrl } from './common.ts';

const monitorProperties = {
  name: { type: 'string', minLength: 1, maxLength: 255 },
  schedule_type: { type: 'string', enum: ['interval', 'cron'] },
  interval_seconds: { type: ['integer', 'null'], minimum: 60, maximum: 604800 },
  cron_expression: { type: ['string', 'null'], minLength: 1, maxLength: 255 },
  timezone: { type: 'string', minLength: 1, maxLength: 64 },
  grace_period_seconds: { type: 'integer', minimum: 0, maximum: 3600 },
  enabled: { type: 'boolean' },
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
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
