import { unprocessable } from '../lib/errors.ts';
import { utf8Length } from '../lib/json.ts';

// What a stored request may carry, beyond what its JSON Schema says: shared by the
// routes' own input checks and the endpoint decider.

export const MAX_BODY_BYTES = 262_144;

/** `prefix` names where the fields sit, e.g. `tasks[3].` inside a batch. */
export function checkBodySize(body: unknown, prefix = ''): void {
  if (body == null) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  if (utf8Length(text) > MAX_BODY_BYTES) throw unprocessable(`body is larger than ${MAX_BODY_BYTES} bytes (256 KB)`, `${prefix}body`);
}

// The HTTP client frames the request itself and refuses these names, and a value it
// cannot send fails every attempt: refuse both here, where the user can still fix them.
const RESERVED_HEADER = /^(connection|content-length|expect|keep-alive|transfer-encoding|upgrade|x-jetcron-.*)$/i;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function checkHeaders(headers: Record<string, string> | undefined, prefix = ''): void {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (RESERVED_HEADER.test(name)) throw unprocessable(`header ${name} is set by jetcron and cannot be configured`, `${prefix}headers.${name}`);
    if (!HEADER_VALUE.test(value)) throw unprocessable(`header ${name} must not contain line breaks or control characters`, `${prefix}headers.${name}`);
  }
}
