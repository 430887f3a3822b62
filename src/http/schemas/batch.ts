import { durationSchema, headersSchema, methodSchema, timestampSchema, urlSchema } from './common.ts';

const url255 = { ...urlSchema, maxLength: 255 } as const;

export const MAX_BATCH_TASKS = 1000;
export const MAX_BATCH_HOSTS = 50;

export const createBatchSchema = {
  $id: 'CreateBatch',
  type: 'object',
  required: ['lane', 'tasks'],
  additionalProperties: false,
  properties: {
    lane: { type: 'string', minLength: 1, maxLength: 255 },
    tasks: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_BATCH_TASKS,
      items: {
        type: 'object',
        required: ['url'],
        additionalProperties: false,
        properties: {
          url: url255,
          method: methodSchema,
          headers: headersSchema,
          body: { type: ['string', 'object', 'array', 'null'] },
          name: { type: 'string', minLength: 1, maxLength: 255 },
        },
      },
    },
    method: methodSchema,
    headers: headersSchema,
    run_at: timestampSchema,
    delay: durationSchema,
    timeout_ms: { type: 'integer', minimum: 1000, maximum: 300000 },
    retry_attempts: { type: 'integer', minimum: 0, maximum: 10 },
    callback_url: url255,
  },
} as const;
