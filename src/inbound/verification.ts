import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Endpoint, Verification } from '../commands/endpoint/types.ts';
import type { SecretBox } from '../nats/secret-box.ts';
import { standardWebhooksDigest, standardWebhooksKey } from '../lib/standard-webhooks.ts';
import { unreachable } from '../lib/unreachable.ts';

/**
 * The contract's inbound verification presets: each checks the raw body of a request
 * against the signature its sender puts in a header, with the endpoint's secret. Made
 * once per endpoint version (the secret decoded, the header named), then called per
 * request. The senders' own formats:
 * - standard-webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` (or the
 *   `svix-` names): `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` entries,
 *   space-separated, keyed with the base64 part of the secret after `whsec_`.
 * - stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]`, the HMAC-SHA256 of
 *   `"{t}.{body}"` keyed with the whole secret; any v1 may match.
 * - github: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
 * - shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>`.
 * - hmac: the HMAC of the body in `header`, after an optional `prefix`.
 * Timestamps (standard-webhooks, stripe) must be within 5 minutes of now, either way.
 */
export type Verdict = { ok: true } | { ok: false; reason: string };
export type Verifier = (headers: readonly (readonly [string, string])[], body: Buffer, nowMs: number) => Verdict;

export const VERIFICATION_TOLERANCE_SECONDS = 300;

const OK: Verdict = { ok: true };

/** The first value of a header, by its name in lower case. */
function header(headers: readonly (readonly [string, string])[], lower: string): string | undefined {
  for (const [name, value] of headers) if (name.length === lower.length && name.toLowerCase() === lower) return value;
  return undefined;
}

/** Constant-time comparison of two texts (the digest as written by the sender and ours). */
function same(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function staleness(timestamp: string, nowMs: number): string | null {
  if (!/^\d{1,15}$/.test(timestamp)) return `the timestamp ${JSON.stringify(timestamp.slice(0, 40))} is not Unix seconds`;
  const skew = Math.floor(nowMs / 1000) - Number(timestamp);
  if (Math.abs(skew) > VERIFICATION_TOLERANCE_SECONDS) return `the timestamp is ${Math.abs(skew)} s ${skew > 0 ? 'old' : 'in the future'} (more than 5 minutes)`;
  return null;
}

const hmac = (algorithm: string, key: string | Buffer, ...parts: (string | Buffer)[]) => {
  const mac = createHmac(algorithm, key);
  for (const p of parts) mac.update(p);
  return mac.digest();
};

function standardWebhooks(secret: string): Verifier {
  const key = standardWebhooksKey(secret);
  return (headers, body, nowMs) => {
    // The `webhook-` names when the request has them, else Svix's.
    const prefix = header(headers, 'webhook-signature') === undefined && header(headers, 'svix-signature') !== undefined ? 'svix' : 'webhook';
    const id = header(headers, `${prefix}-id`);
    const timestamp = header(headers, `${prefix}-timestamp`);
    const signatures = header(headers, `${prefix}-signature`);
    if (id === undefined || timestamp === undefined || signatures === undefined) {
      return { ok: false, reason: `no ${prefix}-id, ${prefix}-timestamp and ${prefix}-signature headers` };
    }
    const stale = staleness(timestamp, nowMs);
    if (stale) return { ok: false, reason: stale };
    const expected = standardWebhooksDigest(key, id, timestamp, body);
    const match = signatures.split(' ').some((entry) => entry.startsWith('v1,') && same(entry.slice(3), expected));
    return match ? OK : { ok: false, reason: `no v1 entry of ${prefix}-signature matches` };
  };
}

function stripe(secret: string): Verifier {
  return (headers, body, nowMs) => {
    const value = header(headers, 'stripe-signature');
    if (value === undefined) return { ok: false, reason: 'no Stripe-Signature header' };
    let timestamp: string | undefined;
    const signatures: string[] = [];
    for (const item of value.split(',')) {
      const eq = item.indexOf('=');
      if (eq < 0) continue;
      const name = item.slice(0, eq).trim();
      if (name === 't' && timestamp === undefined) timestamp = item.slice(eq + 1).trim();
      else if (name === 'v1') signatures.push(item.slice(eq + 1).trim());
    }
    if (timestamp === undefined || signatures.length === 0) return { ok: false, reason: 'Stripe-Signature has no t= or no v1= entry' };
    const stale = staleness(timestamp, nowMs);
    if (stale) return { ok: false, reason: stale };
    const expected = hmac('sha256', secret, `${timestamp}.`, body).toString('hex');
    return signatures.some((s) => same(s.toLowerCase(), expected)) ? OK : { ok: false, reason: 'no v1 signature of Stripe-Signature matches' };
  };
}

/** A digest of the body alone in one header: GitHub's, Shopify's and the generic preset. */
function bodyDigest(secret: string, opts: { header: string; algorithm: string; encoding: 'hex' | 'base64'; prefix: string }): Verifier {
  const lower = opts.header.toLowerCase();
  return (headers, body) => {
    const value = header(headers, lower);
    if (value === undefined) return { ok: false, reason: `no ${opts.header} header` };
    if (!value.startsWith(opts.prefix)) return { ok: false, reason: `${opts.header} does not start with ${JSON.stringify(opts.prefix)}` };
    const given = value.slice(opts.prefix.length).trim();
    const expected = hmac(opts.algorithm, secret, body).toString(opts.encoding);
    return same(opts.encoding === 'hex' ? given.toLowerCase() : given, expected) ? OK : { ok: false, reason: `${opts.header} does not match` };
  };
}

/** The check of one preset with its secret; its verdict's `reason` says why a request failed. */
export function presetVerifier(v: Verification, secret: string): Verifier {
  const check = ((): Verifier => {
    switch (v.type) {
      case 'standard-webhooks':
        return standardWebhooks(secret);
      case 'stripe':
        return stripe(secret);
      case 'github':
        return bodyDigest(secret, { header: 'X-Hub-Signature-256', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' });
      case 'shopify':
        return bodyDigest(secret, { header: 'X-Shopify-Hmac-Sha256', algorithm: 'sha256', encoding: 'base64', prefix: '' });
      case 'hmac':
        return bodyDigest(secret, { header: v.header!, algorithm: v.algorithm!, encoding: v.encoding!, prefix: v.prefix ?? '' });
      default:
        return unreachable(v.type);
    }
  })();
  return (headers, body, nowMs) => {
    const verdict = check(headers, body, nowMs);
    return verdict.ok ? verdict : { ok: false, reason: `verification (${v.type}) failed: ${verdict.reason}` };
  };
}

/**
 * The endpoint's preset with its secret opened, made once per endpoint version (the
 * directory hands out the same object until the endpoint changes); null = no preset.
 * A secret that cannot be opened (another service key) refuses every request, saying why.
 */
export function presetVerifiers(box: SecretBox): (endpoint: Endpoint) => Verifier | null {
  const made = new WeakMap<Endpoint, Verifier>();
  return (endpoint) => {
    if (!endpoint.verification) return null;
    let verifier = made.get(endpoint);
    if (!verifier) {
      const preset = endpoint.verification;
      try {
        verifier = presetVerifier(preset, box.open(endpoint.sealed_verification_secret).secret ?? '');
      } catch (err) {
        const reason = `verification (${preset.type}): the secret could not be opened: ${(err as Error).message}`;
        verifier = () => ({ ok: false, reason });
      }
      made.set(endpoint, verifier);
    }
    return verifier;
  };
}
