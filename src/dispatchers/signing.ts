import { createHmac, timingSafeEqual } from 'node:crypto';
import { standardWebhooksDigest, standardWebhooksKey } from '../lib/standard-webhooks.ts';

export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** `sha256=` + lowercase hex HMAC-SHA256 of `${timestamp}.${executionId}.${body}`. */
export function signatureFor(secret: string, timestamp: number, executionId: string, body: string | Buffer): string {
  // Bytes as sent: a forwarded body need not be UTF-8.
  const mac = createHmac('sha256', secret).update(`${timestamp}.${executionId}.`).update(body).digest('hex');
  return `sha256=${mac}`;
}

/** Standard Webhooks v1 header names (lower case, as the specification writes them). */
export const STANDARD_WEBHOOK_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/**
 * `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` per
 * secret, space-separated, the first secret's first.
 */
export function standardSignature(secrets: readonly string[], webhookId: string, timestamp: number, body: string | Buffer): string {
  return secrets.map((s) => `v1,${standardWebhooksDigest(standardWebhooksKey(s), webhookId, timestamp, body)}`).join(' ');
}

/** Whether these headers already carry Standard Webhooks headers (an upstream sender's), whatever their case. */
export function hasStandardWebhookHeaders(headers: Record<string, string>): boolean {
  return Object.keys(headers).some((name) => (STANDARD_WEBHOOK_HEADERS as readonly string[]).includes(name.toLowerCase()));
}

/**
 * The headers that sign one outgoing request: `X-Jetcron-*` with the current secret
 * (`secrets[0]`), and the Standard Webhooks headers with every secret in `secrets`
 * unless `webhookId` is null (a forward that carries its sender's own).
 */
export function signedHeaders(opts: {
  /** The organization's signing secrets, current first (`signingSecrets`). */
  secrets: readonly string[];
  taskId?: string | undefined;
  executionId: string;
  /** Standard Webhooks' message id: the same on every retry of one message. */
  webhookId: string | null;
  body: string | Buffer;
  nowMs: number;
}): Record<string, string> {
  const timestamp = Math.floor(opts.nowMs / 1000);
  const headers: Record<string, string> = {};
  if (opts.taskId !== undefined) headers['X-Jetcron-Task-Id'] = opts.taskId;
  headers['X-Jetcron-Execution-Id'] = opts.executionId;
  headers['X-Jetcron-Timestamp'] = String(timestamp);
  headers['X-Jetcron-Signature'] = signatureFor(opts.secrets[0]!, timestamp, opts.executionId, opts.body);
  if (opts.webhookId !== null) {
    headers['webhook-id'] = opts.webhookId;
    headers['webhook-timestamp'] = String(timestamp);
    headers['webhook-signature'] = standardSignature(opts.secrets, opts.webhookId, timestamp, opts.body);
  }
  return headers;
}

/**
 * Receiver-side check: the signature must match and the timestamp (unix seconds, as
 * sent in X-Jetcron-Timestamp) must be within the tolerance of now, either way.
 */
export function verifySignature(opts: {
  secret: string;
  signature: string | undefined;
  timestamp: string | number | undefined;
  executionId: string;
  body: string;
  nowMs: number;
  toleranceSeconds?: number | undefined;
}): boolean {
  const { signature, timestamp } = opts;
  if (signature === undefined || timestamp === undefined) return false;
  const ts = typeof timestamp === 'number' ? timestamp : /^\d{1,15}$/.test(timestamp) ? Number(timestamp) : NaN;
  if (!Number.isSafeInteger(ts)) return false;
  const tolerance = opts.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS;
  if (Math.abs(Math.floor(opts.nowMs / 1000) - ts) > tolerance) return false;
  const expected = Buffer.from(signatureFor(opts.secret, ts, opts.executionId, opts.body));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
