import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  MAX_UNCOUNTED_ATTEMPTS, RETRY_JITTER_MS, applyScriptVerdict, attemptStarted, callbackAttempted, decideAttemptResult, planAttempt,
  type AttemptCall, type BeforeAttempt,
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
  job: job(), uncounted: 0, sourceGone: false, requestGone: false, host: 'example.com', blockedUntil: 0, hostState: null, nowMs: NOW, ...over,
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

  test('given a fresh first attempt, then it is sent; a later one carries its uncounted 429s', () => {
    assert.deepEqual(planAttempt(before()), { kind: 'send', uncounted: 0 });
    assert.deepEqual(planAttempt(before({ job: job({ attempt: 3 }), uncounted: 2 })), { kind: 'send', uncounted: 2 });
  });

  test('given a blocked host after 429s, then the deferral keeps the uncounted count', () => {
    const plan = planAttempt(before({ blockedUntil: NOW + 5_000, uncounted: 2 }));
    assert.equal(plan.kind === 'defer' && (plan.events[0]!.data as { uncounted_attempts?: number }).uncounted_attempts, 2);
  });
});

describe('execution decider: the recorded events of a send', () => {
  test('a start carries the uncounted 429s before it', () => {
    const e = attemptStarted(job({ attempt: 2 }), new Date(NOW), 1, NOW);
    assert.equal(e.type, 'AttemptStarted');
    assert.equal((e.data as { uncounted_attempts?: number }).uncounted_attempts, 1);
  });

  test('the retry rule counts only attempts that used a retry (429s under the bound do not)', () => {
    const d = finished(decideAttemptResult(call({ job: job({ attempt: 4, max_attempts: 3 }), outcome: failed500, host: null, uncounted: 2 })));
    // 4 attempts, 2 of them uncounted 429s: 2 counted of 3, so one more follows.
    assert.equal(d.uncounted_attempts, 2);
    assert.ok(d.next_attempt_at);
    assert.equal(d.final, false);
    const last = finished(decideAttemptResult(call({ job: job({ attempt: 4, max_attempts: 3 }), outcome: failed500, host: null, uncounted: 0 })));
    assert.equal(last.next_attempt_at, null);
    assert.equal(last.final, true);
  });

  test('a callback try: a 2xx delivers it; a failure is tried again 5 s, then 20 s later, then no more', () => {
    const cb = { kind: 'callback' as const, org_id: 'org_1', execution_id: 'exe_1', source: job().source, url: 'https://example.com/cb', body: '{}', attempt: 1 };
    const answer = (statusCode: number) => ({ kind: 'response', statusCode } as never);
    const tried = (attempt: number, statusCode: number) => callbackAttempted({ ...cb, attempt }, answer(statusCode), NOW, (ms) => ms).data as { next_attempt_at: string | null; error_message: string | null; status_code: number | null };
    assert.deepEqual([tried(1, 204).next_attempt_at, tried(1, 204).error_message], [null, null]);
    assert.equal(tried(1, 500).next_attempt_at, new Date(NOW + 5_000).toISOString());
    assert.equal(tried(2, 500).next_attempt_at, new Date(NOW + 20_000).toISOString());
    assert.equal(tried(3, 500).next_attempt_at, null);
    assert.equal(tried(3, 500).error_message, 'HTTP 500');
  });
});
