import { flowControlSchema, durationSchema, headersSchema, methodSchema, nameSchema, optionalUrl, retryAttemptsSchema, timeoutSchema, timestampSchema, urlSchema } from './common.ts';

import { MAX_BATCH_TASKS, MAX_BATCH_URL_LENGTH } from '../../commands/batch/decide.ts';

const url255 = { ...urlSchema, maxLength: MAX_BATCH_URL_LENGTH } as const;

export const createBatchSchema = {
  $id: 'CreateBatch',
  type: 'object',
  // `lane` or `flow_control` (the decider says which is missing).
  required: ['tasks'],
  additionalProperties: false,
  properties: {
    lane: { type: 'string', minLength: 1, maxLength: 255 },
    flow_control: flowControlSchema,
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
          name: nameSchema,
          flow_control: {
            ...flowControlSchema,
            description: "The task's flow-control key: in the batch's lane it still runs one at a time in order, and the lane's next starts only when its key has a free slot and room in its rate.",
          },
        },
      },
    },
    method: methodSchema,
    headers: headersSchema,
    run_at: timestampSchema,
    delay: durationSchema,
    timeout_ms: timeoutSchema,
    retry_attempts: retryAttemptsSchema,
    callback_url: optionalUrl(url255),
  },
} as const;
