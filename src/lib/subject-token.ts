import { createHash } from 'node:crypto';

/**
 * Free text (a lane name, a debounce key) as one subject token: the first 32 hex
 * characters of its SHA-256, a fixed size that holds no dot, wildcard or space.
 */
export function subjectToken(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
