import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** `sha256=` + lowercase hex HMAC-SHA256 of `${timestamp}.${executionId}.${body}`. */
export function signatureFor(secret: string, timestamp: number, executionId: string, body: string | Buffer): string {
  // Bytes as sent: a forwarded body need not be UTF-8.
  const mac = createHmac('sha256', secret).update(`${timestamp}.${executionId}.`).update(body).digest('hex');
  return `sha256=${mac}`;
}

export function signedHeaders(opts: {
  secret: string;
  taskId?: string | undefined;
  executionId: string;
  body: string | Buffer;
  nowMs: number;
}): Record<string, string> {
  const timestamp = Math.floor(opts.nowMs / 1000);
  const headers: Record<string, string> = {};
  if (opts.taskId !== undefined) headers['X-Jetcron-Task-Id'] = opts.taskId;
  headers['X-Jetcron-Execution-Id'] = opts.executionId;
  headers['X-Jetcron-Timestamp'] = String(timestamp);
  headers['X-Jetcron-Signature'] = signatureFor(opts.secret, timestamp, opts.executionId, opts.body);
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
