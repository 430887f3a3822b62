import { DURATION_PATTERN } from '../../lib/duration.ts';
import { FLOW_PARALLELISM, FLOW_RATE, MAX_FLOW_KEY_LENGTH } from '../../commands/flow-control/rules.ts';
import { HEADER_NAME_PATTERN, HTTP_METHODS, MAX_HEADER_VALUE_LENGTH, MAX_HEADERS, MAX_NAME_LENGTH, MAX_SCRIPT_LENGTH, MAX_URL_LENGTH, RETRY_ATTEMPTS, TIMEOUT_MS } from '../../commands/payload-checks.ts';

// The limits are the deciders' (src/commands/payload-checks.ts): the deciders apply
// them on every path; the schemas say them in the OpenAPI document and answer first.

/** http(s) only; `format: uri` is checked by parsing it as the HTTP client will, port included (1..65535). */
export const urlSchema = { type: 'string', minLength: 1, maxLength: MAX_URL_LENGTH, pattern: '^[hH][tT][tT][pP][sS]?://[^\\s/?#]+', format: 'uri' } as const;
/** The empty text, where it means the same as null: none (the deciders store null; payload-checks.ts, emptyAsNone). */
export const emptyText = { type: 'string', maxLength: 0, description: 'Empty: none, as null' } as const;
/** An optional URL (a callback, a notification): null or empty means none. */
export const optionalUrl = <T extends object>(url: T) => ({ anyOf: [url, { type: 'null' }, emptyText] }) as const;
export const nullableUrl = optionalUrl(urlSchema);
/** `jetcron-duration`: the pattern, at most 3650d (10 years). */
export const durationSchema = { type: 'string', pattern: DURATION_PATTERN, format: 'jetcron-duration' } as const;
export const nullable = <T extends object>(schema: T) => ({ anyOf: [schema, { type: 'null' }] }) as const;
/** A run time: RFC 3339, years 1970..9999 and at most 10 years ahead. */
export const timestampSchema = { type: 'string', format: 'date-time' } as const;
export const headersSchema = {
  type: 'object',
  maxProperties: MAX_HEADERS,
  propertyNames: { pattern: HEADER_NAME_PATTERN },
  additionalProperties: { type: 'string', maxLength: MAX_HEADER_VALUE_LENGTH },
} as const;
export const methodSchema = { type: 'string', enum: HTTP_METHODS } as const;
export const nameSchema = { type: 'string', minLength: 1, maxLength: MAX_NAME_LENGTH } as const;
export const scriptSchema = { type: 'string', maxLength: MAX_SCRIPT_LENGTH } as const;
export const timeoutSchema = { type: 'integer', ...TIMEOUT_MS } as const;
export const retryAttemptsSchema = { type: 'integer', ...RETRY_ATTEMPTS } as const;

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

const flowLimitProperties = {
  parallelism: { type: ['integer', 'null'], ...FLOW_PARALLELISM },
  rate: { type: ['integer', 'null'], ...FLOW_RATE },
  period: nullable(durationSchema),
} as const;

/** A task's `flow_control` (the contract's "Flow control"); "at least one of parallelism and rate" is the decider's. */
export const flowControlSchema = nullable({
  type: 'object',
  required: ['key'],
  additionalProperties: false,
  properties: { key: { type: 'string', minLength: 1, maxLength: MAX_FLOW_KEY_LENGTH }, ...flowLimitProperties },
});

/** An endpoint's `flow_control`: its forwards' key is the endpoint. */
export const endpointFlowControlSchema = nullable({ type: 'object', additionalProperties: false, properties: flowLimitProperties });
