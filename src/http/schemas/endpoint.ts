import { MAX_FORWARD_URLS } from '../../commands/endpoint/types.ts';
import { headersSchema, methodSchema, nullable, nullableUrl, urlSchema } from './common.ts';

/** Secrets: names a Lua `verify()` reads them by; values write-only. */
export const SECRET_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';

const endpointProperties = {
  name: { type: 'string', minLength: 1, maxLength: 255 },
  forward_urls: { type: 'array', maxItems: MAX_FORWARD_URLS, items: urlSchema },
  retry_attempts: { type: 'integer', minimum: 0, maximum: 10 },
  use_lane: { type: 'boolean' },
  enabled: { type: 'boolean' },
  // Empty means "the original", like null (the spec).
  forward_method: nullable({ anyOf: [methodSchema, { type: 'string', maxLength: 0 }] }),
  forward_headers: nullable(headersSchema),
  forward_body: nullable({ type: 'string', maxLength: 262144 }),
  on_failure_url: nullableUrl,
  on_recovery_url: nullableUrl,
  notify_on_failure: { type: ['boolean', 'null'] },
  notify_on_recovery: { type: ['boolean', 'null'] },
  script: nullable({ type: 'string', maxLength: 65536 }),
  secrets: nullable({
    type: 'object',
    maxProperties: 50,
    propertyNames: { pattern: SECRET_NAME_PATTERN },
    additionalProperties: { type: 'string', maxLength: 4096 },
  }),
} as const;

export const createEndpointSchema = {
  $id: 'CreateEndpoint',
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: endpointProperties,
} as const;

export const updateEndpointSchema = {
  $id: 'UpdateEndpoint',
  type: 'object',
  additionalProperties: false,
  properties: endpointProperties,
} as const;
