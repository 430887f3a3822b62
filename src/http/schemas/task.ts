import { channelsSchema } from './channel.ts';
import { flowControlSchema, durationSchema, headersSchema, methodSchema, nameSchema, nullable, nullableUrl, retryAttemptsSchema, scriptSchema, timeoutSchema, timestampSchema, urlSchema } from './common.ts';

const taskProperties = {
  url: urlSchema,
  name: nameSchema,
  method: methodSchema,
  headers: headersSchema,
  body: { type: ['string', 'object', 'array', 'null'] },
  delay: nullable(durationSchema),
  run_at: nullable(timestampSchema),
  timeout_ms: timeoutSchema,
  retry_attempts: retryAttemptsSchema,
  callback_url: nullableUrl,
  lane: { ...nullable({ type: 'string', maxLength: 255 }), description: 'Tasks of one lane run one at a time, in order. Empty or null: none (parallel).' },
  flow_control: flowControlSchema,
  enabled: { type: 'boolean' },
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
  channels: channelsSchema,
  expected_status_codes: { ...nullable({ type: 'string', maxLength: 255 }), description: 'Comma-separated codes counted as success. Empty or null: any 2xx.' },
  expected_body_pattern: { ...nullable({ type: 'string', maxLength: 1024 }), description: 'Text the response body must contain. Empty or null: any body.' },
  on_failure_url: nullableUrl,
  on_recovery_url: nullableUrl,
  script: nullable(scriptSchema),
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
  properties: { callback_url: nullableUrl },
} as const;
