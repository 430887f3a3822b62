/** What follows a finished attempt: retry, cancel (source gone) or end (lane, callback). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AttemptJob } from '../../src/commands/execution/job.ts';
import { afterAttempt, nextCallback } from '../../src/commands/execution/decide.ts';
import type { AttemptResult } from '../../src/commands/execution/types.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const result = (over: Partial<AttemptResult> = {}): AttemptResult => ({
  execution_id: 'exe_1', source: { type: 'task', id: 'tsk_1', name: 't' }, attempt: 1, status: 'failed', status_code: 500,
  error_message: 'HTTP 500', scheduled_for: '2026-11-25T11:59:00Z', started_at: '2026-11-25T11:59:00Z', finished_at: '2026-11-25T11:59:01Z',
  duration_ms: 1000, request: { method: 'POST', url: 'http://x/', headers: {}, body: null }, response_body: null, response_truncated: false,
  response_headers: null, script_logs: [], next_attempt_at: null, callback_url: null, push_callback_url: null, lane: null, ...over,
  final: over.final ?? !over.next_attempt_at,
});
const job = { kind: 'attempt', execution_id: 'exe_1', attempt: 2 } as AttemptJob;

test('a result asking for another attempt, source present: retry at next_attempt_at, paused when the source is disabled', () => {
  const d = result({ next_attempt_at: '2026-11-25T12:05:00Z' });
  assert.deepEqual(afterAttempt('org_1', d, { job, enabled: false }, NOW), { kind: 'retry', job, dueAt: Date.parse('2026-11-25T12:05:00Z'), enabled: false });
});

test('a task or endpoint gone before its retry: the attempt that ran was its last, recorded cancelled once', () => {
  for (const type of ['task', 'endpoint'] as const) {
    const next = afterAttempt('org_1', result({ next_attempt_at: '2026-11-25T12:05:00Z', source: { type, id: 'src', name: 'n' }, lane: 'l' }), null, NOW);
    assert.equal(next.kind, 'cancel');
    if (next.kind !== 'cancel') return;
    assert.equal(next.event.type, 'ExecutionCancelled');
    assert.equal(next.event.id, 'exe_1.cancelled');
    assert.deepEqual(next.event.data, { execution_id: 'exe_1', source: { type, id: 'src', name: 'n' }, reason: `${type} deleted`, lane: 'l' });
  }
});

test('a schedule gone before its retry: the execution just ends', () => {
  const next = afterAttempt('org_1', result({ next_attempt_at: '2026-11-25T12:05:00Z', source: { type: 'schedule', id: 'sch', name: 's' } }), null, NOW);
  assert.deepEqual(next, { kind: 'end', releaseLane: null, callback: null });
});

test('a final result: the lane is released and the callback goes out with the spec payload', () => {
  const d = result({ status: 'success', status_code: 200, lane: 'orders', callback_url: 'http://cb/' });
  const next = afterAttempt('org_1', d, null, NOW);
  assert.equal(next.kind, 'end');
  if (next.kind !== 'end') return;
  assert.equal(next.releaseLane, 'orders');
  assert.equal(next.callback?.url, 'http://cb/');
  assert.equal(next.callback?.attempt, 1);
  assert.deepEqual(JSON.parse(next.callback!.body), {
    event: 'execution.completed', task_id: 'tsk_1', execution_id: 'exe_1', status: 'success', status_code: 200, duration_ms: 1000,
    started_at: '2026-11-25T11:59:00Z', finished_at: '2026-11-25T11:59:01Z', attempt: 1,
  });
});

test('a callback try that failed with tries left: the next try; the last one: nothing', () => {
  const cb = { kind: 'callback' as const, org_id: 'org_1', execution_id: 'exe_1', source: { type: 'task' as const, id: 't', name: 'n' }, url: 'http://cb/', body: '{}', attempt: 1 };
  assert.deepEqual(nextCallback({ next_attempt_at: '2026-11-25T12:00:05Z', attempt: 1, job: cb }), { job: { ...cb, attempt: 2 }, dueAt: Date.parse('2026-11-25T12:00:05Z') });
  assert.equal(nextCallback({ next_attempt_at: null, attempt: 3, job: cb }), null);
});
