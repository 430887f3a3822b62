import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomToken } from '../../lib/ids.ts';

export interface ParsedKey {
  publicId: string;
  secret: string;
}

const KEY_PATTERN = /^(pk_[0-9a-z]{24})\.(sk_[0-9a-z]{40})$/;
export const PUBLIC_ID_PATTERN = /^pk_[0-9a-z]{24}$/;

export function generateApiKey(): { publicId: string; secret: string; full: string } {
  const publicId = `pk_${randomToken(24)}`;
  const secret = `sk_${randomToken(40)}`;
  return { publicId, secret, full: `${publicId}.${secret}` };
}

export function parseApiKey(full: string): ParsedKey | null {
  const m = KEY_PATTERN.exec(full);
  return m ? { publicId: m[1]!, secret: m[2]! } : null;
}

// The secret is 200 random bits, so a plain SHA-256 is as strong as a slow hash
// here and keeps authentication off the CPU's critical path.
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function secretMatches(secret: string, hash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(hash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Standard Webhooks' form: `whsec_` + base64 of 32 random bytes, so the official
 * verifiers take it as it is. Older secrets (`whsec_` + 40 lower-case letters and
 * digits) are valid base64 too and keep working.
 */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
