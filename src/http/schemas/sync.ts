import { GRACE_SECONDS, INTERVAL_SECONDS } from '../../commands/monitor/decide.ts';
import { headersSchema, methodSchema, nameSchema, urlSchema } from './common.ts';
import { durationSchema, slugSchema } from './monitor.ts';

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
          name: nameSchema,
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
          name: nameSchema,
          schedule_type: { type: 'string', enum: ['interval', 'cron'] },
          cron_expression: { type: 'string', minLength: 1, maxLength: 255 },
          interval_seconds: { type: 'integer', ...INTERVAL_SECONDS },
          grace_seconds: { type: 'integer', ...GRACE_SECONDS },
          timezone: { type: 'string', minLength: 1, maxLength: 64 },
          slug: slugSchema,
          max_duration_seconds: durationSchema,
          min_duration_seconds: durationSchema,
        },
      },
    },
    delete_removed: { type: 'boolean' },
  },
} as const;
