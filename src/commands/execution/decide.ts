import type { AttemptJob, CallbackJob } from './job.ts';
import type { AttemptOutcome } from './outcome.ts';
import type { OutboundResult } from './exchange.ts';
import type { HostSignal, HostState } from '../host-block/rules.ts';
import { FAILURES_BEFORE_BLOCK } from '../host-block/rules.ts';
import { CALLBACK_RETRY_DELAYS_MS, retryDelayMs, retryLandsAfter } from './retry-schedule.ts';
import { unreachable } from '../../lib/unreachable.ts';
import { callbackBody } from './callback-body.ts';
import { executionCancelled } from './ending.ts';
import type { AttemptResult, ExecutionEvent, ExecutionSource } from './types.ts';
import type { CommandMeta } from '../meta.ts';

/*
 * The execution aggregate's decisions (its state machine is `lifecycle.ts`):
 * - `planAttempt`: whether an attempt is sent, or what is recorded instead (a cancel,
 *   a script's failure, a deferral behind a blocked host);
 * - `attemptStarted`, `decideAttemptResult`, `callbackAttempted`: the events of a
 *   start, a result with the retry rules, a callback try with its own retries;
 * - `afterAttempt` / `nextCallback`: what follows a recorded result: the retry, the
 *   cancel when the source is gone, the end with its lane released and its callback.
 * The clock comes in (`nowMs`); the partition owners only carry these out: a task's
 * retry is decided in this file.
 */

/** 429 attempts of one execution that do not use a retry; later ones count like a 5xx. */
export const MAX_UNCOUNTED_ATTEMPTS = 20;
/** The least wait before the attempt after a 429, whatever its Retry-After says. */
export const MIN_RATE_LIMIT_WAIT_MS = 1_000;
/** At most this much (before time scaling) is added to a retry's delay, so a burst of failures does not retry in step. */
export const RETRY_JITTER_MS = 1_000;

export interface BeforeAttempt {
  job: AttemptJob;
  /** Earlier attempts that answered 429 and did not use a retry. */
  uncounted: number;
  /** Its task or endpoint was deleted while the job waited. */
  sourceGone: boolean;
  /** An endpoint's forwarding whose stored inbound request is gone (age limit, endpoint deleted). */
  requestGone: boolean;
  /** An endpoint's forwarding to a URL destination health disabled: cancelled, never sent (absent: no). */
  forwardDisabled?: boolean;
  /** An endpoint's forwarding: the method it would send (as received, or the plan's). */
  forwardMethod?: string | null;
  host: string | null;
  /** End of the host's block for the organization, 0 = not blocked. */
  blockedUntil: number;
  hostState: HostState | null;
  nowMs: number;
}

export type AttemptPlan =
  /** Will not run: record the event and release the job. */
  | { kind: 'record'; events: ExecutionEvent[] }
  /** The host is blocked: record the deferral; the job comes back when the block ends. */
  | { kind: 'defer'; events: ExecutionEvent[]; untilMs: number }
  | { kind: 'send'; uncounted: number };

/** Whether an attempt is sent, and what is recorded when it is not. */
export function planAttempt(input: BeforeAttempt): AttemptPlan {
  const { job, uncounted } = input;
  const cancel = (reason: string): AttemptPlan => ({
    kind: 'record',
    events: [executionCancelled(job.org_id, { execution_id: job.execution_id, source: job.source, reason, lane: job.lane }, input.nowMs)],
  });
  if (input.sourceGone) return cancel(`${job.source.type} deleted`);
  if (input.forwardDisabled) return cancel('forward URL disabled (failing); enable it to send again');
  if (job.inbound?.script_error) return { kind: 'record', events: [scriptFailed(job, input.forwardMethod ?? job.inbound.method ?? '', input.nowMs)] };
  if (input.blockedUntil && input.host) {
    // Not sent: the block is the host's, so the attempt keeps its number and waits.
    const state = input.hostState;
    const reason = state?.reason === 'rate_limited'
      ? `${input.host} answered 429: blocked for this organization`
      : `${input.host} failed ${state?.failures ?? FAILURES_BEFORE_BLOCK} times in a row: blocked for this organization`;
    const deferred: ExecutionEvent = {
      type: 'AttemptDeferred',
      id: `${job.execution_id}.${job.attempt}.deferred.${input.blockedUntil}`,
      at: new Date(input.nowMs).toISOString(),
      org_id: job.org_id,
      data: {
        execution_id: job.execution_id,
        source: job.source,
        attempt: job.attempt,
        scheduled_for: new Date(input.blockedUntil).toISOString(),
        reason,
        host: input.host,
        ...(uncounted ? { uncounted_attempts: uncounted } : {}),
      },
    };
    return { kind: 'defer', events: [deferred], untilMs: input.blockedUntil };
  }
  if (input.requestGone) return cancel('the inbound event is no longer stored (older than 30 days, or its endpoint was deleted)');
  return { kind: 'send', uncounted };
}

/**
 * An endpoint delivery whose script failed in the router (filter, transform or route):
 * the execution ends failed at once, unforwarded and without retries, with the error
 * and the script's lines. Another try of the same script would fail the same way; a
 * replay after the script is fixed runs it again.
 */
function scriptFailed(job: AttemptJob, method: string, nowMs: number): ExecutionEvent {
  const now = new Date(nowMs).toISOString();
  const inbound = job.inbound!;
  return {
    type: 'AttemptFinished',
    id: `${job.execution_id}.${job.attempt}.finished`,
    at: now,
    org_id: job.org_id,
    data: {
      execution_id: job.execution_id,
      source: job.source,
      attempt: job.attempt,
      status: 'failed',
      status_code: null,
      error_message: `not forwarded: the endpoint script failed: ${inbound.script_error}`,
      scheduled_for: job.scheduled_for,
      started_at: now,
      finished_at: now,
      duration_ms: 0,
      request: { method, url: job.request.url, headers: {}, body: null },
      response_body: null,
      response_truncated: false,
      response_headers: null,
      script_logs: inbound.script_logs ?? [],
      next_attempt_at: null,
      final: true,
      callback_url: job.callback_url,
      push_callback_url: job.push_callback_url,
      lane: job.lane,
      inbound: { event_id: inbound.event_id, seq: inbound.seq, origin_seq: inbound.origin_seq },
    },
  };
}

/**
 * `AttemptStarted`, recorded only where it can be seen to matter: an attempt still
 * running after a while (its execution shows `running`). A quick attempt is recorded
 * by its `AttemptFinished` alone, which carries its start.
 */
export function attemptStarted(job: AttemptJob, startedAt: Date, uncounted: number, nowMs: number): ExecutionEvent {
  return {
    type: 'AttemptStarted',
    id: `${job.execution_id}.${job.attempt}.started`,
    at: new Date(nowMs).toISOString(),
    org_id: job.org_id,
    data: {
      execution_id: job.execution_id,
      source: job.source,
      attempt: job.attempt,
      started_at: startedAt.toISOString(),
      scheduled_for: job.scheduled_for,
      ...(uncounted ? { uncounted_attempts: uncounted } : {}),
    },
  };
}

/** One attempt's result as the dispatcher saw it, and what it costs the host. */
export interface AttemptCall {
  job: AttemptJob;
  uncounted: number;
  outcome: AttemptOutcome;
  /** What the attempt says about its host (null: it never reached one). */
  signal: HostSignal | null;
  host: string | null;
  /** End of the host's block after this attempt was counted, 0 = none. */
  hostBlockEnd: number;
  nowMs: number;
  /** Clock.wait: delays scaled by JETCRON_TIME_SCALE. */
  wait: (ms: number) => number;
  /** A number in [0, 1): the retry's share of RETRY_JITTER_MS. */
  jitter: number;
  /** What the script's `log`/`print` wrote in `on_response` (and its error, if any). */
  scriptLogs?: string[];
  /** Everything recorded about the exchange itself (request as sent, response, times). */
  exchange: Pick<AttemptResult, 'started_at' | 'finished_at' | 'duration_ms' | 'request' | 'response_body' | 'response_body_encoding' | 'response_truncated' | 'response_headers'>;
}

/**
 * The attempt rules: whether another attempt follows and when, as `AttemptFinished`.
 * - A 429 is the host's doing, not the task's: it does not use one of the task's
 *   retries (bounded by MAX_UNCOUNTED_ATTEMPTS, so a target that always answers 429
 *   cannot keep an execution alive forever); the next try waits for the host's block.
 * - Otherwise a retryable failure with retries left waits its backoff (and any
 *   Retry-After, and the host's block), plus jitter.
 * - A schedule's retry that would land after its next tick is skipped: the tick takes over.
 */
export function decideAttemptResult(c: AttemptCall): ExecutionEvent {
  const { job, outcome } = c;
  let uncounted = c.uncounted;
  let nextAttemptAt: string | null = null;
  let errorMessage = outcome.error_message;
  if (c.signal?.kind === 'rate_limited' && uncounted < MAX_UNCOUNTED_ATTEMPTS) {
    uncounted++;
    nextAttemptAt = new Date(Math.max(c.hostBlockEnd, c.nowMs + c.wait(MIN_RATE_LIMIT_WAIT_MS))).toISOString();
  } else {
    const counted = job.attempt - uncounted;
    if (outcome.retryable && counted < job.max_attempts) {
      const backoff = c.wait(retryDelayMs(job.source.type, counted) + Math.floor(c.jitter * RETRY_JITTER_MS));
      const wait = Math.max(backoff, c.wait(outcome.retry_after_ms ?? 0));
      nextAttemptAt = new Date(Math.max(c.nowMs + wait, c.hostBlockEnd)).toISOString();
    }
  }
  if (nextAttemptAt && job.next_tick_at && retryLandsAfter(job.next_tick_at, nextAttemptAt)) {
    nextAttemptAt = null;
    errorMessage = `${errorMessage ?? 'failed'}; retry skipped: it would land after the next run at ${job.next_tick_at}`;
  }
  if (c.host && c.hostBlockEnd > c.nowMs && c.signal && c.signal.kind !== 'up') {
    errorMessage = `${errorMessage ?? 'failed'}; ${c.host} blocked for this organization until ${new Date(c.hostBlockEnd).toISOString()}`;
  }
  return {
    type: 'AttemptFinished',
    id: `${job.execution_id}.${job.attempt}.finished`,
    at: new Date(c.nowMs).toISOString(),
    org_id: job.org_id,
    data: {
      execution_id: job.execution_id,
      source: job.source,
      attempt: job.attempt,
      status: outcome.status,
      status_code: outcome.status_code,
      error_message: errorMessage,
      scheduled_for: job.scheduled_for,
      ...c.exchange,
      script_logs: c.scriptLogs ?? [],
      next_attempt_at: nextAttemptAt,
      final: nextAttemptAt === null,
      callback_url: job.callback_url,
      push_callback_url: job.push_callback_url,
      lane: job.lane,
      ...(uncounted ? { uncounted_attempts: uncounted } : {}),
      ...(job.inbound ? { inbound: { event_id: job.inbound.event_id, seq: job.inbound.seq, origin_seq: job.inbound.origin_seq } } : {}),
    },
  };
}

/**
 * `on_response` may return `{status = "success"}` or `{status = "failed"}`: it replaces
 * the attempt's outcome, and so whether it is retried and what is notified. A failure
 * it declares is retried like any failure; anything else it returns changes nothing.
 */
export function applyScriptVerdict(outcome: AttemptOutcome, verdict: unknown): AttemptOutcome {
  const status = verdict && typeof verdict === 'object' && !Array.isArray(verdict) ? (verdict as { status?: unknown }).status : undefined;
  if (status === 'success') return { ...outcome, status: 'success', error_message: null, retryable: false, retry_after_ms: null };
  if (status === 'failed' && outcome.status === 'success') return { ...outcome, status: 'failed', error_message: 'failed by the script (on_response)', retryable: true };
  return outcome;
}

/**
 * One delivery try of a completion callback: a 2xx delivers it; otherwise it is tried
 * again after CALLBACK_RETRY_DELAYS_MS while tries are left.
 */
export function callbackAttempted(job: CallbackJob, result: OutboundResult, nowMs: number, wait: (ms: number) => number): ExecutionEvent {
  const ok = result.kind === 'response' && result.statusCode >= 200 && result.statusCode < 300;
  const delay = CALLBACK_RETRY_DELAYS_MS[job.attempt - 1];
  return {
    type: 'CallbackAttempted',
    id: `${job.execution_id}.cb${job.attempt}`,
    at: new Date(nowMs).toISOString(),
    org_id: job.org_id,
    data: {
      execution_id: job.execution_id,
      url: job.url,
      attempt: job.attempt,
      status_code: result.kind === 'response' ? result.statusCode : null,
      error_message: ok ? null : result.kind === 'response' ? `HTTP ${result.statusCode}` : result.message,
      next_attempt_at: !ok && delay !== undefined ? new Date(nowMs + wait(delay)).toISOString() : null,
      job,
    },
  };
}

/** Its next attempt as its source says it now (the caller loads the source), or null when the source is gone. */
export interface RetryPlan {
  job: AttemptJob;
  /** A disabled task or schedule keeps its retry paused until it is enabled again. */
  enabled: boolean;
}

/**
 * What follows a recorded attempt, for the task partition owner that acts on it:
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
  if (!d.final && d.next_attempt_at) {
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

/** A callback delivery that failed with tries left: the next try, due at `next_attempt_at`. */
export function nextCallback(d: { next_attempt_at: string | null; attempt: number; job: CallbackJob }): { job: CallbackJob; dueAt: number } | null {
  if (!d.next_attempt_at) return null;
  return { job: { ...d.job, attempt: d.attempt + 1 }, dueAt: Date.parse(d.next_attempt_at) };
}
