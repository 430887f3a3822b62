/** decideRetry: which command a retry of an execution runs, or why it is refused (issue 36). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideRetry, type RetriedExecution } from '../../src/commands/execution/retry.ts';
import { ApiError } from '../../src/lib/errors.ts';

const row = (over: Partial<RetriedExecution>): RetriedExecution => ({
  id: 'exe_1', status: 'failed', source_type: 'task', source_id: 'tsk_1', url: 'https://a.example/x', parent_id: null, callback_url: null, ...over,
});
const refused = (e: RetriedExecution) => {
  try {
    decideRetry(e);
  } catch (err) {
    assert.ok(err instanceof ApiError);
    return { status: err.status, field: err.field };
  }
  assert.fail('not refused');
};

test('every final status is retried by its source: a task, a schedule, an endpoint delivery to its URL', () => {
  for (const status of ['success', 'failed', 'timeout', 'cancelled']) {
    assert.deepEqual(decideRetry(row({ status })), { type: 'TriggerTask', taskId: 'tsk_1', retryOf: 'exe_1', callbackUrl: null });
  }
  assert.deepEqual(decideRetry(row({ source_type: 'schedule', source_id: 'sch_1' })), { type: 'TriggerSchedule', scheduleId: 'sch_1', retryOf: 'exe_1', callbackUrl: null });
  assert.deepEqual(decideRetry(row({ source_type: 'endpoint', source_id: 'ep_1', parent_id: 'evt_1' })), {
    type: 'ReplayDelivery', endpointId: 'ep_1', eventId: 'evt_1', url: 'https://a.example/x', retryOf: 'exe_1',
  });
});

test('pending or running is 409; an endpoint delivery without its event, or an unknown source, is 409 field source', () => {
  assert.equal(refused(row({ status: 'pending' })).status, 409);
  assert.equal(refused(row({ status: 'running' })).status, 409);
  assert.deepEqual(refused(row({ source_type: 'endpoint', source_id: 'ep_1' })), { status: 409, field: 'source' });
  assert.deepEqual(refused(row({ source_type: 'monitor' })), { status: 409, field: 'source' });
});

test("a push-level callback given for the execution is given for its retry (the source's applies without one)", () => {
  const cb = 'https://hooks.example/done';
  assert.deepEqual(decideRetry(row({ callback_url: cb })), { type: 'TriggerTask', taskId: 'tsk_1', retryOf: 'exe_1', callbackUrl: cb });
  assert.deepEqual(decideRetry(row({ source_type: 'schedule', source_id: 'sch_1', callback_url: cb })), { type: 'TriggerSchedule', scheduleId: 'sch_1', retryOf: 'exe_1', callbackUrl: cb });
});
