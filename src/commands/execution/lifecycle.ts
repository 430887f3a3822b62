import type { AttemptJob, CallbackJob } from './job.ts';
import { afterAttempt, nextCallback, type RetryPlan } from './decide.ts';
import type { ExecutionEvent } from './types.ts';

/*
 * The execution's one state machine: where a live execution stands and what each of
 * its recorded events moves it to. The partition owners hold executions in this
 * state and carry out the step each event returns (their queues and key slots); what
 * follows a result (a retry, a cancel, the end with its callback) is decided here and
 * in `decide.ts`, never in an owner.
 */

export type Phase =
  /** Waiting for its time and its key's slot. */
  | 'queued'
  /** Its attempt (or its callback) is being sent. */
  | 'running'
  /** Will not run: its `ExecutionCancelled` is to be recorded. */
  | 'cancelling'
  /** Its result is recorded; its completion callback is due (or being sent). */
  | 'callback'
  /** Its lane's head, handed to its key's owner in another partition, which sends it; its result is read from the execution's subject. */
  | 'handed';

export interface ExecutionState {
  phase: Phase;
  /** The next attempt to send, built from its source as it is now. */
  job: AttemptJob;
  /** Answers so far that used no retry (429). */
  uncounted: number;
  /** Phase `cancelling`: the event that records it. */
  cancel: ExecutionEvent | null;
  /** Phase `callback`: the delivery to try next. */
  callback: CallbackJob | null;
}

/** What the owner does after an event moved an execution (its key's slot is released by every step but `none`). */
export type Step =
  /** Nothing to carry out (a start recorded). */
  | { kind: 'none' }
  /** It waits again, for `dueAt` (a deferral, a retry; `PARKED` while its source is disabled, or the next callback try). */
  | { kind: 'wait'; dueAt: number }
  /** It will not run again: its cancel (`state.cancel`) is to be recorded. */
  | { kind: 'cancel' }
  /** Its completion callback is due at `dueAt` (`state.callback`), outside any key. */
  | { kind: 'callback'; dueAt: number }
  /** Over: nothing more to send or record. `release`: its key's slot was held by this attempt. */
  | { kind: 'over'; release: boolean };

/** Due "never": a disabled source's execution keeps its place (a lane's held retry its slot) until the source is enabled. */
export const PARKED = Number.MAX_SAFE_INTEGER;

/**
 * The next attempt as its source says it now (`null`: the source is gone); asked only
 * when a result wants another attempt.
 */
export type RetryLookup = (attempt: number, at: string, pushCallback: string | null) => RetryPlan | null;

/** An execution waiting for its time, planned by its source's event. */
export function planned(job: AttemptJob, uncounted = 0): ExecutionState {
  return { phase: 'queued', job, uncounted, cancel: null, callback: null };
}

/** Its attempt (or callback) is taken to be sent now. */
export function started(state: ExecutionState): void {
  if (state.phase === 'queued') state.phase = 'running';
}

/** A start that was not sent after all (a store refusing, an organization unreadable): it waits again. */
export function notStarted(state: ExecutionState): void {
  if (state.phase === 'running') state.phase = 'queued';
}

/** A lane's head handed to its key's owner in another partition (`ExecutionHandedToKey`). */
export function handed(state: ExecutionState): void {
  state.phase = 'handed';
}

/** A hand-off that was not stored: the lane holds its head again. Whether it was handed. */
export function handBack(state: ExecutionState): boolean {
  if (state.phase !== 'handed') return false;
  state.phase = 'queued';
  return true;
}

/** It will not run: `event` records why. */
export function cancelling(state: ExecutionState, event: ExecutionEvent): void {
  state.phase = 'cancelling';
  state.cancel = event;
}

/**
 * One recorded event of the execution: its new state, and what its owner does. The
 * same events give the same state whether the owner recorded them or a takeover reads
 * them back. `retryOf` gives the next attempt when a result asks for one.
 */
export function onRecorded(state: ExecutionState, event: ExecutionEvent, retryOf: RetryLookup): Step {
  switch (event.type) {
    case 'AttemptStarted':
      return { kind: 'none' };
    case 'ExecutionCancelled':
      return { kind: 'over', release: false };
    case 'AttemptDeferred':
      state.uncounted = event.data.uncounted_attempts ?? 0;
      state.phase = 'queued';
      return { kind: 'wait', dueAt: Date.parse(event.data.scheduled_for) };
    case 'AttemptFinished': {
      const d = event.data;
      const retry = !d.final && d.next_attempt_at ? retryOf(d.attempt + 1, d.next_attempt_at, d.push_callback_url) : null;
      const next = afterAttempt(event.org_id, d, retry, Date.parse(event.at));
      state.uncounted = d.uncounted_attempts ?? 0;
      switch (next.kind) {
        case 'retry':
          state.job = next.job;
          state.phase = 'queued';
          return { kind: 'wait', dueAt: next.enabled ? next.dueAt : PARKED };
        case 'cancel':
          cancelling(state, next.event);
          return { kind: 'cancel' };
        case 'end':
          if (!next.callback) return { kind: 'over', release: true };
          state.phase = 'callback';
          state.callback = next.callback;
          return { kind: 'callback', dueAt: Date.parse(d.finished_at) };
      }
      return { kind: 'none' };
    }
    case 'CallbackAttempted': {
      const next = nextCallback(event.data);
      if (!next) return { kind: 'over', release: false };
      state.callback = next.job;
      return { kind: 'wait', dueAt: next.dueAt };
    }
  }
}
