import { channelsSchema } from './channel.ts';
import { MAX_FORWARD_URLS, VERIFICATION_TYPES } from '../../commands/endpoint/types.ts';
import { endpointFlowControlSchema, headersSchema, methodSchema, nameSchema, nullable, nullableUrl, retryAttemptsSchema, scriptSchema, urlSchema } from './common.ts';

/** Secrets: names a Lua `verify()` reads them by; values write-only. */
export const SECRET_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';

/**
 * An inbound verification preset (every plan). Which fields each type needs is the
 * endpoint decider's rule (422 `verification.<name>`); this says their shapes.
 */
const verificationSchema = {
  type: 'object',
  required: ['type'],
  additionalProperties: false,
  description:
    'Checked on the raw body of every inbound request, before a script\'s verify(). A request that fails is stored ' +
    '(outcome "rejected", error_message saying why), answered 403 {id, status: "rejected"} and not forwarded. ' +
    'standard-webhooks: webhook-id/-timestamp/-signature (or svix-id/-timestamp/-signature), timestamp within 5 minutes; ' +
    'stripe: Stripe-Signature t=…,v1=… (any v1 may match), timestamp within 5 minutes; github: X-Hub-Signature-256 sha256=<hex>; ' +
    'shopify: X-Shopify-Hmac-Sha256 <base64>; hmac: an HMAC of the raw body in `header` (needs header, algorithm, encoding; prefix optional). ' +
    'Responses show the preset without its secret.',
  properties: {
    type: { type: 'string', enum: VERIFICATION_TYPES },
    secret: { type: 'string', minLength: 1, maxLength: 1024, writeOnly: true, description: 'Write-only: required whenever verification is set, never returned' },
    header: { type: 'string', pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$", description: 'hmac only: the header holding the signature' },
    algorithm: { type: 'string', enum: ['sha256', 'sha1'], description: 'hmac only' },
    encoding: { type: 'string', enum: ['hex', 'base64'], description: 'hmac only: how the header writes the digest' },
    prefix: { type: 'string', maxLength: 64, description: 'hmac only: text before the digest in the header, e.g. "sha256="' },
  },
} as const;

const endpointProperties = {
  name: nameSchema,
  forward_urls: { type: 'array', maxItems: MAX_FORWARD_URLS, items: urlSchema },
  retry_attempts: retryAttemptsSchema,
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
  channels: channelsSchema,
  script: nullable(scriptSchema),
  secrets: nullable({
    type: 'object',
    maxProperties: 50,
    propertyNames: { pattern: SECRET_NAME_PATTERN },
    additionalProperties: { type: 'string', maxLength: 4096 },
  }),
  verification: nullable(verificationSchema),
  flow_control: endpointFlowControlSchema,
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
