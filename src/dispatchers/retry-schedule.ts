const MINUTE = 60_000;

/** Tasks and schedules: retry n waits (n+1)²/2 minutes (2, 4.5, 8, 12.5, 18, …). */
export function taskRetryDelayMs(retry: number): number {
  return ((retry + 1) ** 2 / 2) * MINUTE;
}

/** Callbacks: 3 tries in all, 5 s then 20 s apart. */
export const CALLBACK_RETRY_DELAYS_MS = [5_000, 20_000] as const;
