import { durationProblem } from '../lib/duration.ts';
import { ApiError, unprocessable } from '../lib/errors.ts';
import { httpUrlProblem, instantProblem } from '../lib/input-checks.ts';
import { utf8Length } from '../lib/json.ts';

// What a stored outbound request may carry: the rules every decider that stores one
// (task, schedule, batch, endpoint) applies to the spec it is about to store, so no
// path that reaches the decider (a route, sync, a batch, a debounced replace) skips
// one. The JSON Schemas of the API take their limits from here; their messages and
// these are the same, so a value refused by either reads alike.

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const MAX_BODY_BYTES = 262_144;
export const MAX_URL_LENGTH = 2048;
export const MAX_NAME_LENGTH = 255;
export const MAX_SCRIPT_LENGTH = 65_536;
export const MAX_HEADERS = 100;
export const MAX_HEADER_VALUE_LENGTH = 8192;
/** RFC 9110 token characters, 1..256 of them. */
export const HEADER_NAME_PATTERN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$";
export const TIMEOUT_MS = { minimum: 1000, maximum: 300_000 } as const;
export const RETRY_ATTEMPTS = { minimum: 0, maximum: 10 } as const;

const HEADER_NAME = new RegExp(HEADER_NAME_PATTERN);
/** The end of the sentence a header name that is no token gets (here and in the schema's message). */
export const HEADER_NAME_PROBLEM = "must have names of 1 to 256 token characters (letters, digits, !#$%&'*+.^_`|~-)";
/** The same for a method (the schema's enum message reads alike). */
export const METHOD_PROBLEM = `must be one of ${HTTP_METHODS.join(', ')}`;

/** `prefix` names where the fields sit, e.g. `forward_` for an endpoint's forward_body. */
export function checkBodySize(body: unknown, prefix = ''): void {
  if (body == null) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  if (utf8Length(text) > MAX_BODY_BYTES) throw unprocessable(`body is larger than ${MAX_BODY_BYTES} bytes (256 KB)`, `${prefix}body`);
}

// The HTTP client frames the request itself and refuses these names, and a value it
// cannot send fails every attempt: refuse both here, where the user can still fix them.
// jetcron signs every request with its own X-Jetcron-* and Standard Webhooks headers.
const RESERVED_HEADER = /^(connection|content-length|expect|keep-alive|transfer-encoding|upgrade|x-jetcron-.*|webhook-(id|timestamp|signature))$/i;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function checkHeaders(headers: Record<string, string> | null | undefined, prefix = ''): void {
  const entries = Object.entries(headers ?? {});
  if (entries.length > MAX_HEADERS) throw unprocessable(`${prefix}headers must NOT have more than ${MAX_HEADERS} properties`, `${prefix}headers`);
  for (const [name, value] of entries) {
    // A name that is no HTTP token (a space, a line break) cannot even be named in a field path.
    if (!HEADER_NAME.test(name)) throw unprocessable(`${prefix}headers ${HEADER_NAME_PROBLEM}`, `${prefix}headers`);
    if (RESERVED_HEADER.test(name)) throw unprocessable(`header ${name} is set by jetcron and cannot be configured`, `${prefix}headers.${name}`);
    if (typeof value !== 'string') throw unprocessable(`${prefix}headers.${name} has the wrong type`, `${prefix}headers.${name}`);
    if (!HEADER_VALUE.test(value)) throw unprocessable(`header ${name} must not contain line breaks or control characters`, `${prefix}headers.${name}`);
    if (value.length > MAX_HEADER_VALUE_LENGTH) throw unprocessable(`${prefix}headers.${name} must NOT have more than ${MAX_HEADER_VALUE_LENGTH} characters`, `${prefix}headers.${name}`);
  }
}

/** An outbound URL (http or https, a host, a port in range) of at most `maxLength` characters; null/undefined pass. */
export function checkUrl(url: string | null | undefined, field: string, maxLength = MAX_URL_LENGTH): void {
  if (url == null) return;
  if (url.length > maxLength) throw unprocessable(`${field} must NOT have more than ${maxLength} characters`, field);
  const problem = httpUrlProblem(url);
  if (problem) throw unprocessable(`${field} ${problem}`, field);
}

export function checkLength(text: string | null | undefined, field: string, maxLength: number, minLength = 0): void {
  if (text == null) return;
  if (text.length < minLength) throw unprocessable(`${field} must NOT have fewer than ${minLength} characters`, field);
  if (text.length > maxLength) throw unprocessable(`${field} must NOT have more than ${maxLength} characters`, field);
}

export function checkRange(value: number | null | undefined, field: string, range: { minimum: number; maximum: number }): void {
  if (value == null) return;
  if (!Number.isInteger(value)) throw unprocessable(`${field} has the wrong type`, field);
  if (value < range.minimum) throw unprocessable(`${field} must be >= ${range.minimum}`, field);
  if (value > range.maximum) throw unprocessable(`${field} must be <= ${range.maximum}`, field);
}

export function checkDuration(text: string | null | undefined, field: string): void {
  if (text == null) return;
  const problem = durationProblem(text);
  if (problem) throw unprocessable(`${field} ${problem}`, field);
}

/** A run time the timers can hold: years 1970..9999, at most 10 years after `nowMs`. */
export function checkInstant(text: string | null | undefined, field: string, nowMs: number): void {
  if (text == null) return;
  const problem = instantProblem(text, nowMs);
  if (problem) throw unprocessable(`${field} ${problem}`, field);
}

/** The request itself, as every stored request has it: where, how, with what, for how long, how often. */
export interface RequestSpec {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: unknown;
  timeout_ms: number;
  retry_attempts: number;
}

export function checkRequest(spec: Partial<RequestSpec>, prefix = ''): void {
  checkUrl(spec.url, `${prefix}url`);
  if (spec.method != null && !(HTTP_METHODS as readonly string[]).includes(spec.method)) {
    throw unprocessable(`${prefix}method ${METHOD_PROBLEM}`, `${prefix}method`);
  }
  checkHeaders(spec.headers, prefix);
  checkBodySize(spec.body, prefix);
  checkRange(spec.timeout_ms, `${prefix}timeout_ms`, TIMEOUT_MS);
  checkRange(spec.retry_attempts, `${prefix}retry_attempts`, RETRY_ATTEMPTS);
}

/**
 * `input` with each of `fields` that is the empty text set to null. These are the
 * fields whose absence means "none" (no lane, any 2xx, any body, no callback, no
 * script, …): the spec lets the empty text say it too, on every path. A field with a
 * format of its own (a duration, a time, a cron expression, a name, a key) refuses the
 * empty text instead. The input itself when nothing changes.
 */
export function emptyAsNone<T extends object>(input: T, fields: readonly string[]): T {
  let out: Record<string, unknown> | undefined;
  for (const field of fields) {
    if ((input as Record<string, unknown>)[field] !== '') continue;
    out ??= { ...input } as Record<string, unknown>;
    out[field] = null;
  }
  return (out as T | undefined) ?? input;
}

/**
 * Runs `fn`, re-raising a rule break with the item's place in the call: `tasks[3]`
 * turns `body` into `tasks[3].body` (a batch's task, a synced schedule).
 */
export function inItem<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ApiError) throw new ApiError(err.status, err.message, err.field ? `${prefix}.${err.field}` : prefix, err.headers);
    throw err;
  }
}
