/**
 * Checks of single input values against what the event log, Postgres and the
 * runtime can hold. Each `…Problem` returns the end of a sentence that starts with
 * the field's name ("run_at must be …"), or null when the value is fine.
 */

/** Dates outside these years are refused: before 1970 nothing is due, after 9999 ISO text changes shape. */
export const MIN_YEAR = 1970;
export const MAX_YEAR = 9999;
/** A run time further ahead than this is almost surely a typo (a year 2205 for 2025). */
export const MAX_YEARS_AHEAD = 10;
const YEAR_MS = 365.25 * 86_400_000;

/** An instant as `Date.parse` reads it; `aheadOf` (ms) also caps it at {@link MAX_YEARS_AHEAD} years after that time. */
export function instantProblem(text: string, aheadOf?: number): string | null {
  const t = Date.parse(text);
  // Date.parse refuses some RFC 3339 texts (a leap second, 23:59:60); a NaN must never reach toISOString.
  if (!Number.isFinite(t)) return 'is not a date-time this service can read';
  const year = new Date(t).getUTCFullYear();
  if (year < MIN_YEAR || year > MAX_YEAR) return `must be between the years ${MIN_YEAR} and ${MAX_YEAR}`;
  if (aheadOf !== undefined && t > aheadOf + MAX_YEARS_AHEAD * YEAR_MS) return `must be at most ${MAX_YEARS_AHEAD} years ahead`;
  return null;
}

/** An outbound target: what `new URL()` parses, http or https, with a host and a port in 1..65535. */
export function httpUrlProblem(text: string): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    // The usual cause past the scheme check is a port over 65535 or a bad character in the host.
    return 'is not a URL that can be parsed (check the host and port)';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http or https URL';
  if (!url.hostname) return 'must name a host';
  if (url.port !== '' && Number(url.port) < 1) return 'must have a port between 1 and 65535';
  return null;
}

// Without the `u` flag these match UTF-16 code units, so a lone half of a pair is found.
const NUL = /\u0000/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Why `text` cannot be stored, or null. Postgres refuses NUL in text and jsonb, and
 * jsonb refuses an unpaired surrogate escape: an event holding either would stop the
 * projector on it for good.
 */
export function unstorable(text: string): string | null {
  if (NUL.test(text)) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must not contain an unpaired UTF-16 surrogate (not valid Unicode)';
  return null;
}

/** `text` with what the store cannot hold replaced by U+FFFD, for values kept as received (ping bodies). */
export function storableText(text: string): string {
  return text.replace(UNSTORABLE_ALL, '\ufffd');
}

const fieldName = (path: string, key: string | number) =>
  typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${storableText(key)}` : storableText(key);

/**
 * The first key or string of a parsed JSON value that cannot be stored, as the
 * contract's field path (`headers.X-Foo`, `tasks[2].name`; null for the value itself).
 * Recursive: callers bound the depth first (see `nestingPastDepth`).
 */
export function unstorableField(value: unknown, path = ''): { field: string | null; message: string } | null {
  if (typeof value === 'string') {
    const problem = unstorable(value);
    return problem ? { field: path || null, message: `${path || 'body'} ${problem}` } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableField(value[i], fieldName(path, i));
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const keyProblem = unstorable(key);
      const field = fieldName(path, key);
      if (keyProblem) return { field, message: `the name of ${field} ${keyProblem}` };
      const found = unstorableField(item, field);
      if (found) return found;
    }
  }
  return null;
}
