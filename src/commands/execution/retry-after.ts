const DELTA_SECONDS = /^-?\d+(?:\.\d+)?$/;
// IMF-fixdate, RFC 850 and asctime all start with a day name and carry hh:mm:ss.
const HTTP_DATE = /^[A-Za-z]{3,9},? .*\d{1,2}:\d{2}:\d{2}/;

/** Milliseconds to wait per a Retry-After header value; undefined when absent or unparseable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (DELTA_SECONDS.test(text)) return Math.max(0, Math.ceil(Number(text) * 1000));
  if (!HTTP_DATE.test(text)) return undefined;
  // asctime has no zone but means GMT; Date.parse would read it as local time.
  const at = Date.parse(/(GMT|UTC|[+-]\d{4})$/i.test(text) ? text : `${text} GMT`);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
