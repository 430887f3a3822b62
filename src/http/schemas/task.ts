import { durationSchema, headersSchema, methodSchema, nullable, nullableUrl, timestampSchema, urlSchema } from './common.ts';

const taskProperties = {
  url: urlSchema,
  name: { type: 'string', minLength: 1, maxLength: 255 },
  method: methodSchema,
  headers: headersSchema,
  body: { type: ['string', 'object', 'array', 'null'] },
  delay: nullable(durationSchema),
  run_at: nullable(timestampSchema),
  timeout_ms: { type: 'integer', minimum: 1000, maximum: 300000 },
  retry_attempts: { type: 'integer', minimum: 0, maximum: 10 },
  callback_url: nullableUrl,
  lane: nullable({ type: 'string', maxLength: 255 }),
  enabled: { type: 'boolean' },
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
  expected_status_codes: nullable({ type: 'string', maxLength: 255 }),
  expected_body_pattern: nullable({ type: 'string', maxLength: 1024 }),
  on_failure_url: nullableUrl,
  on_recovery_url: nullableUrl,
  script: nullable({ type: 'string', maxLength: 65536 }),
  debounce: nullable(durationSchema),
  debounce_key: nullable({ type: 'string', maxLength: 255 }),
} as const;

export const createTaskSchema = {
  $id: 'CreateTask',
  type: 'object',
  required: ['url'],
  additionalProperties: false,
  properties: taskProperties,
} as const;

export const updateTaskSchema = {
  $id: 'UpdateTask',
  type: 'object',
  additionalProperties: false,
  properties: { ...taskProperties, url: urlSchema },
} as const;

export const triggerTaskSchema = {
  $id: 'TriggerTask',
  type: 'object',
  additionalProperties: false,
  properties: { callback_url: urlSchema },
} as const;
