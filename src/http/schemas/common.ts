import { DURATION_PATTERN } from '../../lib/duration.ts';

/** http(s) only; `format: uri` is checked by parsing it as the HTTP client will, port included (1..65535). */
export const urlSchema = { type: 'string', minLength: 1, maxLength: 2048, pattern: '^[hH][tT][tT][pP][sS]?://[^\\s/?#]+', format: 'uri' } as const;
export const nullableUrl = { anyOf: [urlSchema, { type: 'null' }] } as const;
/** `jetcron-duration`: the pattern, at most 3650d (10 years). */
export const durationSchema = { type: 'string', pattern: DURATION_PATTERN, format: 'jetcron-duration' } as const;
export const nullable = <T extends object>(schema: T) => ({ anyOf: [schema, { type: 'null' }] }) as const;
/** A run time: RFC 3339, years 1970..9999 and at most 10 years ahead. */
export const timestampSchema = { type: 'string', format: 'date-time' } as const;
export const headersSchema = {
  type: 'object',
  maxProperties: 100,
  propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$" },
  additionalProperties: { type: 'string', maxLength: 8192 },
} as const;
export const methodSchema = { type: 'string', enum: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] } as const;

/** The contract's error body, for the OpenAPI document. */
export const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'field'],
      properties: { message: { type: 'string' }, field: { type: ['string', 'null'] } },
    },
  },
} as const;
