import type { SourceType } from './types.ts';

const MINUTE = 60_000;

/** Tasks and schedules: retry n waits (n+1)²/2 minutes (2, 4.5, 8, 12.5, 18, …). */
export function taskRetryDelayMs(retry: number): number {
  return ((retry + 1) ** 2 / 2) * MINUTE;
}

/** Endpoint forwarding (the contract): retry n waits min(30 s · 2^(n−1), 1 h). */
export function endpointRetryDelayMs(retry: number): number {
  return Math.min(30_000 * 2 ** (retry - 1), 60 * MINUTE);
}

/** The wait before retry n of an execution of this kind of source. */
export function retryDelayMs(source: SourceType, retry: number): number {
  return source === 'endpoint' ? endpointRetryDelayMs(retry) : taskRetryDelayMs(retry);
}

/** Callbacks: 3 tries in all, 5 s then 20 s apart. */
export const CALLBACK_RETRY_DELAYS_MS = [5_000, 20_000] as const;

/**
 * The cron-retry rule: a schedule's retry is skipped when it would run at or after
 * the schedule's next tick, which then takes over (one run at that instant, not two).
 * `nextRunAt` null or undefined (no next tick) never skips; an unparseable time never skips.
 */
export function retryLandsAfter(nextRunAt: number | string | Date | null | undefined, retryAt: number | string | Date): boolean {
  if (nextRunAt === null || nextRunAt === undefined) return false;
  const next = toMs(nextRunAt);
  const retry = toMs(retryAt);
  if (Number.isNaN(next) || Number.isNaN(retry)) return false;
  return retry >= next;
}

function toMs(t: number | string | Date): number {
  return typeof t === 'number' ? t : typeof t === 'string' ? Date.parse(t) : t.getTime();
}
