/**
 * The service's sense of time. `scale` is JETCRON_TIME_SCALE: every wait the
 * service counts itself (delay, retries, backoff, monitor intervals) is multiplied
 * by it, so tests of hour-long behaviour run in seconds. Wall-clock instants
 * (run_at, cron ticks) and request timeouts are never scaled.
 */
export interface Clock {
  now(): number;
  scale: number;
  /** A service-counted wait in real milliseconds. */
  wait(ms: number): number;
}

export function createClock(scale = 1): Clock {
  return { now: () => Date.now(), scale, wait: (ms) => Math.max(0, Math.round(ms * scale)) };
}
