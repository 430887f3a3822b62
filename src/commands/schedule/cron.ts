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
 * The contract's aliases, spelled out: cron-parser knows some of them under other
 * rules (`@midnight` it reads as "@mid" + "night" and refuses), so none is left to it.
 */
export const CRON_ALIASES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** The expression with an alias replaced by its fields; undefined for an `@` word that is not one of the contract's. */
function expand(expr: string): string | undefined {
  const trimmed = expr.trim();
  if (!trimmed.startsWith('@')) return trimmed;
  return CRON_ALIASES[trimmed.toLowerCase()];
}

/**
 * The contract's dialect: 5 fields, or 6 with leading seconds; names (JAN, MON),
 * lists, ranges, steps and the @yearly … @hourly aliases; evaluated in `tz`, so
 * DST changes move UTC instants as wall clocks do. Returns an error text or null.
 */
export function cronError(expr: string): string | null {
  const expanded = expand(expr);
  if (expanded === undefined) return `unknown cron alias ${expr.trim()}; use one of ${Object.keys(CRON_ALIASES).join(' ')}`;
  const fields = expanded.split(/\s+/).length;
  if (fields < 5 || fields > 6) return 'cron must have 5 fields (or 6 with seconds first)';
  try {
    CronExpressionParser.parse(expanded, { tz: 'UTC' }).next();
    return null;
  } catch (err) {
    return `invalid cron expression: ${(err as Error).message}`;
  }
}

/** The first tick strictly after `afterMs`. */
export function nextTick(expr: string, tz: string, afterMs: number): Date {
  return CronExpressionParser.parse(expand(expr) ?? expr.trim(), { currentDate: new Date(afterMs), tz }).next().toDate();
}

/** Every tick strictly after `afterMs`, in order, from one parse of the expression. */
export function* ticksAfter(expr: string, tz: string, afterMs: number): Generator<number, never> {
  const it = CronExpressionParser.parse(expand(expr) ?? expr.trim(), { currentDate: new Date(afterMs), tz });
  for (;;) yield it.next().getTime();
}
