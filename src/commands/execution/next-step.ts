import type { AttemptJob, CallbackJob } from './job.ts';
import { callbackBody } from './callback-body.ts';
import { executionCancelled } from './ending.ts';
import type { AttemptResult, ExecutionEvent } from './types.ts';

/** Its next attempt as its source says it now (the caller loads the source), or null when the source is gone. */
export interface RetryPlan {
  job: AttemptJob;
  /** A disabled task or schedule keeps its retry paused until it is enabled again. */
  enabled: boolean;
}

/**
 * What follows a finished attempt, decided in one place for every reader that acts on
 * it (today the translator, with the partition owners next):
 * - `retry`: the result asked for another attempt and the source still exists: that
 *   attempt, due at `next_attempt_at`;
 * - `cancel`: it asked for another attempt but its task or endpoint is gone: the
 *   attempt that ran was its last, recorded as cancelled (a schedule's retry whose
 *   schedule is gone just ends);
 * - `end`: the execution is over: its lane is released and its callback, if any, sent.
 */
export type NextStep =
  | { kind: 'retry'; job: AttemptJob; dueAt: number; enabled: boolean }
  | { kind: 'cancel'; event: ExecutionEvent; releaseLane: string | null }
  | { kind: 'end'; releaseLane: string | null; callback: CallbackJob | null };

export function afterAttempt(orgId: string, d: AttemptResult, retry: RetryPlan | null, nowMs: number): NextStep {
  if (d.next_attempt_at) {
    if (retry) return { kind: 'retry', job: retry.job, dueAt: Date.parse(d.next_attempt_at), enabled: retry.enabled };
    if (d.source.type === 'task' || d.source.type === 'endpoint') {
      const event = executionCancelled(orgId, { execution_id: d.execution_id, source: d.source, reason: `${d.source.type} deleted`, lane: d.lane ?? null }, nowMs);
      // The lane is released when the cancel is read back (it carries the lane).
      return { kind: 'cancel', event, releaseLane: null };
    }
  }
  const callback: CallbackJob | null = d.callback_url
    ? { kind: 'callback', org_id: orgId, execution_id: d.execution_id, source: d.source, url: d.callback_url, body: callbackBody(d), attempt: 1 }
    : null;
  return { kind: 'end', releaseLane: d.lane ?? null, callback };
}

/** Whether a result needs its source loaded: only one that asks for another attempt. */
export function needsRetryPlan(d: AttemptResult): boolean {
  return !!d.next_attempt_at;
}

/** A callback delivery that failed with tries left: the next try, due at `next_attempt_at`. */
export function nextCallback(d: { next_attempt_at: string | null; attempt: number; job: CallbackJob }): { job: CallbackJob; dueAt: number } | null {
  if (!d.next_attempt_at) return null;
  return { job: { ...d.job, attempt: d.attempt + 1 }, dueAt: Date.parse(d.next_attempt_at) };
}
