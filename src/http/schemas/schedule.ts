import { channelsSchema } from './channel.ts';
import { headersSchema, methodSchema, nameSchema, nullable, retryAttemptsSchema, scriptSchema, timeoutSchema, urlSchema } from './common.ts';

const scheduleProperties = {
  url: urlSchema,
  cron: { type: 'string', minLength: 1, maxLength: 255 },
  timezone: { type: 'string', minLength: 1, maxLength: 64 },
  name: nameSchema,
  method: methodSchema,
  headers: headersSchema,
  body: { type: ['string', 'object', 'array', 'null'] },
  timeout_ms: timeoutSchema,
  retry_attempts: retryAttemptsSchema,
  enabled: { type: 'boolean' },
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
  channels: channelsSchema,
  expected_status_codes: { ...nullable({ type: 'string', maxLength: 255 }), description: 'Comma-separated codes counted as success. Empty or null: any 2xx.' },
  script: nullable(scriptSchema),
} as const;

export const createScheduleSchema = {
  $id: 'CreateSchedule',
  type: 'object',
  required: ['url', 'cron'],
  additionalProperties: false,
  properties: scheduleProperties,
} as const;

export const updateScheduleSchema = {
  $id: 'UpdateSchedule',
  type: 'object',
  additionalProperties: false,
  properties: scheduleProperties,
} as const;
