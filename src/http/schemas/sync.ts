import { headersSchema, methodSchema, urlSchema } from './common.ts';

const key = { type: 'string', minLength: 1, maxLength: 255 } as const;

export const syncSchema = {
  $id: 'Sync',
  type: 'object',
  additionalProperties: false,
  properties: {
    schedules: {
      type: 'array',
      maxItems: 1000,
      items: {
        type: 'object',
        required: ['key', 'url', 'cron'],
        additionalProperties: false,
        properties: {
          key,
          name: { type: 'string', minLength: 1, maxLength: 255 },
          url: urlSchema,
          method: methodSchema,
          cron: { type: 'string', minLength: 1, maxLength: 255 },
          timezone: { type: 'string', minLength: 1, maxLength: 64 },
          headers: headersSchema,
          body: { type: ['string', 'object', 'array', 'null'] },
        },
      },
    },
    monitors: {
      type: 'array',
      maxItems: 1000,
      items: {
        type: 'object',
        required: ['key', 'name', 'schedule_type'],
        additionalProperties: false,
        properties: {
          key,
          name: { type: 'string', minLength: 1, maxLength: 255 },
          schedule_type: { type: 'string', enum: ['interval', 'cron'] },
          cron_expression: { type: 'string', minLength: 1, maxLength: 255 },
          interval_seconds: { type: 'integer', minimum: 60, maximum: 604800 },
          grace_seconds: { type: 'integer', minimum: 0, maximum: 3600 },
          timezone: { type: 'string', minLength: 1, maxLength: 64 },
        },
      },
    },
    delete_removed: { type: 'boolean' },
  },
} as const;
