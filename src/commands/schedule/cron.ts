import { CronExpressionParser } from 'cron-parser';

/** Whether `tz` is an IANA time zone this runtime knows. */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * The contract's dialect: 5 fields, or 6 with leading seconds; names (JAN, MON),
 * lists, ranges, steps and the @yearly … @hourly aliases; evaluated in `tz`, so
 * DST changes move UTC instants as wall clocks do. Returns an error text or null.
 */
export function cronError(expr: string): string | null {
  const trimmed = expr.trim();
  const fields = trimmed.split(/\s+/).length;
  if (!trimmed.startsWith('@') && (fields < 5 || fields > 6)) return 'cron must have 5 fields (or 6 with seconds first)';
  try {
    CronExpressionParser.parse(trimmed, { tz: 'UTC' }).next();
    return null;
  } catch (err) {
    return `invalid cron expression: ${(err as Error).message}`;
  }
}

/** The first tick strictly after `afterMs`. */
export function nextTick(expr: string, tz: string, afterMs: number): Date {
  return CronExpressionParser.parse(expr.trim(), { currentDate: new Date(afterMs), tz }).next().toDate();
}
