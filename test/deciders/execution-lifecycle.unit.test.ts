// The execution's one state machine (lifecycle.ts), given/when/then: given the
// recorded events so far, when one more is recorded, then its phase and the step the
// owner carries out. No owner, no NATS, no clock but the events' own times.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { attemptStarted, callbackAttempted, decideAttemptResult, type AttemptCall } from '../../src/commands/execution/decide.ts';
import { executionCancelled } from '../../src/commands/execution/ending.ts';
import { notStarted, onRecorded, PARKED, planned, started, type ExecutionState, type RetryLookup, type Step } from '../../src/commands/execution/lifecycle.ts';
import type { AttemptJob } from '../../src/commands/execution/job.ts';
import type { AttemptOutcome } from '../../src/commands/execution/outcome.ts';
import type { ExecutionEvent } from '../../src/commands/execution/types.ts';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const job = (over: Partial<AttemptJob> = {}): AttemptJob => ({
  kind: 'attempt', org_id: 'org_1', execution_id: 'exe_1', source: { type: 'task', id: 'tsk_1', name: 't' }, attempt: 1, max_attempts: 3,
  scheduled_for: new Date(NOW).toISOString(), request: { url: 'https://example.com/x', method: 'POST', headers: {}, body: null, timeout_ms: 1000 },
  expected_status_codes: null, expected_body_pattern: null, callback_url: null, push_callback_url: null, lane: null, script: null, ...over,
} as AttemptJob);
const ok: AttemptOutcome = { status: 'success', status_code: 200, error_message: null, retryable: false, retry_after_ms: null };
const failed: AttemptOutcome = { status: 'failed', status_code: 503, error_message: 'HTTP 503', retryable: true, retry_after_ms: null };
const exchange = {
  started_at: new Date(NOW - 5).toISOString(), finished_at: new Date(NOW).toISOString(), duration_ms: 5,
  request: { method: 'POST', url: 'https://example.com/x', headers: {}, body: null } as never, response_body: 'ok', response_body_encoding: null as never, response_truncated: false, response_headers: {},
};
const result = (j: AttemptJob, outcome: AttemptOutcome, over: Partial<AttemptCall> = {}) =>
  decideAttemptResult({ job: j, uncounted: 0, outcome, signal: null, host: null, hostBlockEnd: 0, nowMs: NOW, wait: (ms) => ms, jitter: 0, exchange, ...over });

/** The source as it is: present and enabled, unless told otherwise. */
const source = (present = true, enabled = true): RetryLookup => (attempt, at) => (present ? { job: job({ attempt, scheduled_for: at }), enabled } : null);

/** given: events recorded so far on a planned execution; when: one more; then: its phase and the owner's step. */
function given(events: ExecutionEvent[], lookup: RetryLookup = source(), state: ExecutionState = planned(job())) {
  for (const e of events) {
    started(state);
    onRecorded(state, e, lookup);
  }
  return {
    when(event: ExecutionEvent) {
      started(state);
      const step = onRecorded(state, event, lookup);
      return {
        then(phase: ExecutionState['phase'] | null, expected: Step): ExecutionState {
          assert.deepEqual(step, expected);
          if (phase) assert.equal(state.phase, phase);
          return state;
        },
      };
    },
  };
}

describe('execution lifecycle: what a recorded event moves an execution to', () => {
  test('a start: nothing changes', () => {
    given([]).when(attemptStarted(job(), new Date(NOW), 0, NOW)).then('running', { kind: 'none' });
  });

  test('a success with no callback: over, its key slot released', () => {
    given([]).when(result(job(), ok)).then(null, { kind: 'over', release: true });
  });

  test('a retryable failure with retries left: waits for its retry, the next attempt built from the source as it is now', () => {
    const first = result(job(), failed);
    const due = Date.parse((first.data as { next_attempt_at: string }).next_attempt_at);
    const state = given([]).when(first).then('queued', { kind: 'wait', dueAt: due });
    assert.equal(state.job.attempt, 2);
  });

  test('a retry of a disabled source is parked, keeping its place', () => {
    given([], source(true, false)).when(result(job(), failed)).then('queued', { kind: 'wait', dueAt: PARKED });
  });

  test('a retry whose source is gone: cancelled, recorded as such', () => {
    const state = given([], source(false)).when(result(job(), failed)).then('cancelling', { kind: 'cancel' });
    assert.equal(state.cancel!.type, 'ExecutionCancelled');
  });

  test('the last attempt ends it; with a callback, the callback is due at once, outside any key', () => {
    const last = result(job({ attempt: 3, callback_url: 'https://example.com/cb' }), failed);
    assert.equal((last.data as { final: boolean }).final, true);
    const state = given([]).when(last).then('callback', { kind: 'callback', dueAt: NOW });
    assert.equal(state.callback!.url, 'https://example.com/cb');
  });

  test('a callback try that fails waits for the next try; the last try ends it', () => {
    const withCallback = result(job({ callback_url: 'https://example.com/cb' }), ok);
    const spec = given([withCallback]);
    const state = spec.when(callbackAttempted({ kind: 'callback', org_id: 'org_1', execution_id: 'exe_1', source: job().source, url: 'https://example.com/cb', body: '{}', attempt: 1 }, { kind: 'response', statusCode: 500 } as never, NOW, (ms) => ms))
      .then('callback', { kind: 'wait', dueAt: NOW + 5_000 });
    assert.equal(state.callback!.attempt, 2);
    given([]).when(callbackAttempted({ ...state.callback!, attempt: 3 }, { kind: 'response', statusCode: 500 } as never, NOW, (ms) => ms))
      .then(null, { kind: 'over', release: false });
  });

  test('a host block defers the attempt: it waits for the block, keeping its number and its 429s', () => {
    const deferred: ExecutionEvent = {
      type: 'AttemptDeferred', id: 'exe_1.1.deferred', at: new Date(NOW).toISOString(), org_id: 'org_1',
      data: { execution_id: 'exe_1', source: job().source, attempt: 1, scheduled_for: new Date(NOW + 9_000).toISOString(), reason: 'blocked', uncounted_attempts: 2 },
    } as ExecutionEvent;
    const state = given([]).when(deferred).then('queued', { kind: 'wait', dueAt: NOW + 9_000 });
    assert.equal(state.uncounted, 2);
    assert.equal(state.job.attempt, 1);
  });

  test('a cancel read back ends it', () => {
    given([]).when(executionCancelled('org_1', { execution_id: 'exe_1', source: job().source, reason: 'task deleted', lane: null }, NOW)).then(null, { kind: 'over', release: false });
  });

  test('the same events give the same state whether recorded here or read back at a takeover', () => {
    const events = [result(job(), failed), result(job({ attempt: 2 }), failed)];
    const here = planned(job());
    for (const e of events) {
      started(here);
      onRecorded(here, e, source());
    }
    const takeover = planned(job());
    for (const e of events) onRecorded(takeover, e, source());
    assert.deepEqual(takeover, here);
    assert.equal(here.job.attempt, 3);
  });

  test('a start not sent after all waits again', () => {
    const state = planned(job());
    started(state);
    notStarted(state);
    assert.equal(state.phase, 'queued');
  });
});
