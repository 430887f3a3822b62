import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  MAX_UNCOUNTED_ATTEMPTS, RETRY_JITTER_MS, applyScriptVerdict, decideAttemptResult, decideExecution, evolveExecution, executionSoFar, planAttempt,
  type AttemptCall, type BeforeAttempt, type Execution,
} from '../../src/commands/execution/decide.ts';
import type { ExecutionEvent } from '../../src/commands/execution/types.ts';
import type { AttemptJob } from '../../src/commands/execution/job.ts';
import type { AttemptOutcome } from '../../src/commands/execution/outcome.ts';

const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const job = (over: Partial<AttemptJob> = {}): AttemptJob => ({
  kind: 'attempt', org_id: 'org_1', execution_id: 'exe_1', source: { type: 'task', id: 'tsk_1', name: 't' }, attempt: 1, max_attempts: 3,
  scheduled_for: new Date(NOW - 10).toISOString(), request: { url: 'https://example.com/x', method: 'POST', headers: {}, body: null, timeout_ms: 30_000 },
  expected_status_codes: null, expected_body_pattern: null, callback_url: null, push_callback_url: null, lane: null, ...over,
});
const ok: AttemptOutcome = { status: 'success', status_code: 200, error_message: null, retryable: false, retry_after_ms: null };
const failed500: AttemptOutcome = { status: 'failed', status_code: 500, error_message: 'HTTP 500', retryable: true, retry_after_ms: null };
const exchange: AttemptCall['exchange'] = {
  started_at: new Date(NOW - 5).toISOString(), finished_at: new Date(NOW).toISOString(), duration_ms: 5,
  request: { method: 'POST', url: 'https://example.com/x', headers: {}, body: null } as never, response_body: 'ok', response_body_encoding: null as never, response_truncated: false, response_headers: {},
};
const call = (over: Partial<AttemptCall> = {}): AttemptCall => ({
  job: job(), uncounted: 0, outcome: ok, signal: null, host: 'example.com', hostBlockEnd: 0, nowMs: NOW, wait: (ms) => ms, jitter: 0, exchange, ...over,
});
const finished = (e: ExecutionEvent) => {
  assert.equal(e.type, 'AttemptFinished');
  return (e as Extract<ExecutionEvent, { type: 'AttemptFinished' }>).data;
};
const before = (over: Partial<BeforeAttempt> = {}): BeforeAttempt => ({
  job: job(), sofar: null, sourceGone: false, requestGone: false, host: 'example.com', blockedUntil: 0, hostState: null, nowMs: NOW, ...over,
});

describe('execution decider: the attempt result', () => {
  test('given a success, when decided, then the execution ends: no next attempt, id fixed per attempt', () => {
    const e = decideAttemptResult(call());
    assert.equal(e.id, 'exe_1.1.finished');
    const d = finished(e);
    assert.equal(d.status, 'success');
    assert.equal(d.next_attempt_at, null);
    assert.deepEqual(d.script_logs, []);
  });

  test('given a retryable failure with retries left, then the next attempt waits its backoff plus jitter', () => {
    const plain = finished(decideAttemptResult(call({ outcome: failed500 })));
    const jittered = finished(decideAttemptResult(call({ outcome: failed500, jitter: 0.5 })));
    assert.ok(plain.next_attempt_at);
    assert.equal(Date.parse(jittered.next_attempt_at!) - Date.parse(plain.next_attempt_at!), RETRY_JITTER_MS / 2);
    assert.ok(Date.parse(plain.next_attempt_at!) > NOW);
  });

  test('given the last allowed attempt fails, then the execution ends failed', () => {
    const d = finished(decideAttemptResult(call({ job: job({ attempt: 3 }), outcome: failed500 })));
    assert.equal(d.status, 'failed');
    assert.equal(d.next_attempt_at, null);
  });

  test('given a 429, then it does not use a retry and waits for the host block', () => {
    const end = NOW + 30_000;
    const d = finished(decideAttemptResult(call({
      job: job({ attempt: 3 }), outcome: { ...failed500, status_code: 429 },
      signal: { kind: 'rate_limited', blockMs: 30_000 } as never, hostBlockEnd: end,
    })));
    assert.equal(d.next_attempt_at, new Date(end).toISOString());
    assert.equal(d.uncounted_attempts, 1);
    const worn = finished(decideAttemptResult(call({ job: job({ attempt: 3 }), uncounted: MAX_UNCOUNTED_ATTEMPTS, outcome: { ...failed500, status_code: 429 }, signal: { kind: 'rate_limited', blockMs: 1 } as never })));
    assert.equal(worn.uncounted_attempts, MAX_UNCOUNTED_ATTEMPTS);
  });

  test('given a schedule whose retry would land after its next tick, then the retry is skipped', () => {
    const d = finished(decideAttemptResult(call({ job: job({ source: { type: 'schedule', id: 'sch_1', name: 's' }, next_tick_at: new Date(NOW + 1000).toISOString() }), outcome: failed500 })));
    assert.equal(d.next_attempt_at, null);
    assert.match(d.error_message!, /retry skipped/);
  });

  test('given on_response logs, then they are the attempt\'s script_logs', () => {
    assert.deepEqual(finished(decideAttemptResult(call({ scriptLogs: ['a', 'b'] }))).script_logs, ['a', 'b']);
  });
});

describe('execution decider: on_response verdicts', () => {
  test('success overrides a failure (no retry); failed overrides a success (retried); anything else changes nothing', () => {
    assert.deepEqual(applyScriptVerdict(failed500, { status: 'success' }), { ...failed500, status: 'success', error_message: null, retryable: false, retry_after_ms: null });
    const f = applyScriptVerdict(ok, { status: 'failed' });
    assert.equal(f.status, 'failed');
    assert.equal(f.retryable, true);
    assert.match(f.error_message!, /script/);
    assert.deepEqual(applyScriptVerdict(failed500, { status: 'failed' }), failed500);
    for (const v of [null, undefined, true, 'success', [{ status: 'success' }], { status: 'maybe' }]) assert.deepEqual(applyScriptVerdict(ok, v), ok);
  });
});

describe('execution decider: before an attempt', () => {
  test('given the attempt is already recorded (a redelivery), then nothing is sent or stored', () => {
    const last = decideAttemptResult(call());
    const state = evolveExecution(null, last);
    assert.deepEqual(planAttempt(before({ sofar: executionSoFar(state, 1) })), { kind: 'done' });
    assert.deepEqual(planAttempt(before({ job: job({ attempt: 2 }), sofar: executionSoFar(state, 2) })), { kind: 'send', uncounted: 0 });
  });

  test('given its task was deleted while it waited, then ExecutionCancelled is recorded instead', () => {
    const plan = planAttempt(before({ sourceGone: true }));
    assert.equal(plan.kind, 'record');
    assert.equal(plan.kind === 'record' && plan.events[0]!.type, 'ExecutionCancelled');
  });

  test('given its host is blocked, then the attempt is deferred to the end of the block, keeping its number', () => {
    const until = NOW + 5000;
    const plan = planAttempt(before({ blockedUntil: until, hostState: { reason: 'rate_limited' } as never }));
    assert.equal(plan.kind, 'defer');
    if (plan.kind !== 'defer') return;
    assert.equal(plan.untilMs, until);
    assert.equal(plan.events[0]!.type, 'AttemptDeferred');
    assert.match(JSON.stringify(plan.events[0]), /429/);
  });

  test('given a fresh first attempt, then it is sent', () => {
    assert.deepEqual(planAttempt(before()), { kind: 'send', uncounted: 0 });
  });
});

describe('execution aggregate: state and commands', () => {
  const meta = { now: new Date(NOW).toISOString(), nowMs: NOW, eventId: 'evt_test', scaleWait: (ms: number) => ms, newId: () => 'x' };
  const started = (attempt: number, uncounted = 0): Execution => ({ execution_id: 'exe_1', attempt, stage: 'started', uncounted });

  test('evolve: a started attempt is not done, a finished one is, a cancelled execution is over for every attempt', () => {
    const start = decideExecution({ type: 'RecordStart', job: job({ attempt: 2 }), startedAt: new Date(NOW) }, started(2, 1), meta);
    assert.equal(start.length, 1);
    assert.equal(start[0]!.type, 'AttemptStarted');
    const s1 = evolveExecution(null, start[0]!);
    assert.deepEqual(executionSoFar(s1, 2), { uncounted: 1, done: false });
    assert.deepEqual(executionSoFar(s1, 1), { uncounted: 1, done: true });
    const s2 = evolveExecution(s1, decideAttemptResult(call({ job: job({ attempt: 2 }), uncounted: 1 })));
    assert.deepEqual(executionSoFar(s2, 2), { uncounted: 1, done: true });
    assert.deepEqual(executionSoFar(s2, 3), { uncounted: 1, done: false });
    const [cancel] = decideExecution({ type: 'Cancel', org_id: 'org_1', execution_id: 'exe_1', source: job().source, reason: 'task deleted', lane: null }, s2, meta);
    const s3 = evolveExecution(s2, cancel!);
    assert.equal(s3.stage, 'over');
    assert.equal(executionSoFar(s3, 99).done, true);
    // Over is over: a second cancel records nothing.
    assert.deepEqual(decideExecution({ type: 'Cancel', org_id: 'org_1', execution_id: 'exe_1', source: job().source, reason: 'again', lane: null }, s3, meta), []);
  });

  test('PlanAttempt: nothing to record for a fresh attempt or a recorded one; a cancel for a deleted source; a deferral for a blocked host', () => {
    const plan = (over: Partial<BeforeAttempt>, state: Execution | null) => decideExecution({ type: 'PlanAttempt', before: { ...before(over) } }, state, meta);
    assert.deepEqual(plan({}, null), []);
    assert.deepEqual(plan({}, evolveExecution(null, decideAttemptResult(call()))), []);
    assert.equal(plan({ sourceGone: true }, null)[0]!.type, 'ExecutionCancelled');
    const [deferred] = plan({ blockedUntil: NOW + 5_000 }, started(1, 2));
    assert.equal(deferred!.type, 'AttemptDeferred');
    assert.equal((deferred!.data as { uncounted_attempts?: number }).uncounted_attempts, 2);
  });

  test('RecordAttempt: the retry rule reads the uncounted 429s from the state', () => {
    const [e] = decideExecution({ type: 'RecordAttempt', call: { job: job({ attempt: 4, max_attempts: 3 }), outcome: failed500, signal: null, host: null, hostBlockEnd: 0, jitter: 0, exchange } }, started(4, 2), meta);
    const d = finished(e!);
    // 4 attempts, 2 of them uncounted 429s: 2 counted of 3, so one more follows.
    assert.equal(d.uncounted_attempts, 2);
    assert.ok(d.next_attempt_at);
    const [last] = decideExecution({ type: 'RecordAttempt', call: { job: job({ attempt: 4, max_attempts: 3 }), outcome: failed500, signal: null, host: null, hostBlockEnd: 0, jitter: 0, exchange } }, started(4, 0), meta);
    assert.equal(finished(last!).next_attempt_at, null);
  });

  test('RecordCallback: a 2xx delivers it; a failure is tried again 5 s, then 20 s later, then no more', () => {
    const cb = { kind: 'callback' as const, org_id: 'org_1', execution_id: 'exe_1', source: job().source, url: 'https://example.com/cb', body: '{}', attempt: 1 };
    const answer = (statusCode: number) => ({ kind: 'response', statusCode } as never);
    const tried = (attempt: number, statusCode: number) => decideExecution({ type: 'RecordCallback', job: { ...cb, attempt }, result: answer(statusCode) }, null, meta)[0]!.data as { next_attempt_at: string | null; error_message: string | null; status_code: number | null };
    assert.deepEqual([tried(1, 204).next_attempt_at, tried(1, 204).error_message], [null, null]);
    assert.equal(tried(1, 500).next_attempt_at, new Date(NOW + 5_000).toISOString());
    assert.equal(tried(2, 500).next_attempt_at, new Date(NOW + 20_000).toISOString());
    assert.equal(tried(3, 500).next_attempt_at, null);
    assert.equal(tried(3, 500).error_message, 'HTTP 500');
  });
});
