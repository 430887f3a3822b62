/**
 * Destination health (CONTRACT.md "Destination health: auto-disable"): the rule both
 * the schedule decider and the endpoint decider apply to a destination's final
 * results. Pure: the clock is the result's own time, passed in the command, so
 * deciding the same result again (a reader replaying after a crash) decides the same.
 */

/** At least this many final failures in a row, besides the time, before a destination is disabled. */
export const AUTO_DISABLE_MIN_FAILURES = 3;

/** The organization setting's default (`auto_disable_after`), before it is scaled. */
export const DEFAULT_AUTO_DISABLE_AFTER = '5d';

/** A destination's run of final failures; `counted_seq` makes counting idempotent. */
export interface FailureStreak {
  /** The time of the first final failure of the run; null: not failing. */
  failing_since: string | null;
  consecutive_failures: number;
  /** EVENTS sequence of the last result counted: a result at or below it was counted already. */
  counted_seq: number;
}

export const NO_STREAK: FailureStreak = { failing_since: null, consecutive_failures: 0, counted_seq: 0 };

/** How an execution ended, as a notification shows it (the organization webhook's `execution`): the run that disabled a destination. */
export interface FinalRun {
  id: string;
  status: string;
  status_code: number | null;
  error_message: string | null;
  attempt: number;
  scheduled_for: string;
  finished_at: string;
}

/** One execution's final result, as the counting reader hands it to a decider. */
export interface FinalResult {
  executionId: string;
  /** What the disabling event carries for its notification; absent: only the id. */
  run?: FinalRun;
  /** EVENTS sequence of its `AttemptFinished`. */
  seq: number;
  ok: boolean;
  /** When it finished (ISO 8601): the clock of the rule. */
  at: string;
  /** The organization's `auto_disable_after` in real milliseconds (scaled); null: never. */
  disableAfterMs: number | null;
}

export type StreakStep =
  | { kind: 'counted'; streak: FailureStreak }
  | { kind: 'reset'; streak: FailureStreak }
  | { kind: 'disable'; streak: FailureStreak };

/**
 * What one final result does to a streak: nothing (counted before, or a success with no
 * failure to reset), a failure counted, a reset, or the failure that disables: at least
 * `AUTO_DISABLE_MIN_FAILURES` in a row AND failing for at least `disableAfterMs`.
 */
export function stepStreak(streak: FailureStreak, result: FinalResult): StreakStep | null {
  if (result.seq <= streak.counted_seq) return null;
  if (result.ok) {
    if (streak.consecutive_failures === 0) return null;
    return { kind: 'reset', streak: { ...NO_STREAK, counted_seq: result.seq } };
  }
  const since = streak.failing_since ?? result.at;
  const next: FailureStreak = { failing_since: since, consecutive_failures: streak.consecutive_failures + 1, counted_seq: result.seq };
  const long = result.disableAfterMs !== null && Date.parse(result.at) - Date.parse(since) >= result.disableAfterMs;
  return { kind: long && next.consecutive_failures >= AUTO_DISABLE_MIN_FAILURES ? 'disable' : 'counted', streak: next };
}
