import { headersSchema as headers } from './common.ts';

/** `POST /scripts/test`: one hook run as the service would run it, nothing stored. */
export const scriptTestSchema = {
  $id: 'ScriptTest',
  type: 'object',
  required: ['script', 'hook'],
  additionalProperties: false,
  properties: {
    script: { type: 'string', minLength: 1, maxLength: 65536 },
    hook: { type: 'string', enum: ['verify', 'filter', 'transform', 'route', 'on_response'] },
    /** For the endpoint hooks: the `req` table. */
    request: {
      type: 'object',
      additionalProperties: false,
      properties: {
        method: { type: 'string', maxLength: 16 },
        path: { type: 'string', maxLength: 2048 },
        query: { type: 'string', maxLength: 8192 },
        headers,
        body: { type: 'string', maxLength: 1048576 },
        source_ip: { type: ['string', 'null'], maxLength: 64 },
      },
    },
    /** For `verify`: the endpoint's secrets by name. */
    secrets: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, maxProperties: 20 },
    /** For `on_response`: the `res` table. */
    response: {
      type: 'object',
      additionalProperties: false,
      properties: {
        status: { type: ['integer', 'null'], minimum: 100, maximum: 599 },
        headers,
        body: { type: 'string', maxLength: 1048576 },
        duration_ms: { type: 'number', minimum: 0 },
      },
    },
    /** For `on_response`: the `task` table. */
    task: {
      type: 'object',
      additionalProperties: false,
      properties: {
        id: { type: 'string', maxLength: 64 },
        name: { type: 'string', maxLength: 255 },
        url: { type: 'string', maxLength: 2048 },
        method: { type: 'string', maxLength: 16 },
        attempt: { type: 'integer', minimum: 1 },
      },
    },
  },
} as const;
