/** The last whole second formatted, `YYYY-MM-DDTHH:MM:SS.`, and which second it is. */
let second = Number.NaN;
let prefix = '';

/** Past 9999-12-31T23:59:59.999Z `toISOString` writes a six-digit signed year: no prefix to reuse. */
const LAST_FOUR_DIGIT_YEAR_MS = 253_402_300_799_999;

/**
 * `new Date(ms).toISOString()`, the same text, at a fraction of the cost: V8 formats a
 * date through a runtime call and printf, measured at 2–3 µs a call on this machine,
 * where the inbound path formats one or two per request. The date part is reused for
 * every millisecond of the same second.
 */
export function isoTime(ms: number): string {
  const t = Math.trunc(ms);
  if (!(t >= 0 && t <= LAST_FOUR_DIGIT_YEAR_MS)) return new Date(ms).toISOString();
  const s = Math.floor(t / 1000);
  if (s !== second) {
    prefix = new Date(s * 1000).toISOString().slice(0, 20);
    second = s;
  }
  const milli = t - s * 1000;
  return `${prefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}
