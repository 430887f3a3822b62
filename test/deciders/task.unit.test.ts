import { describe, test } from 'node:test';
import { decideTask, evolveTask } from '../../src/commands/task/decide.ts';
import { TASK_DEFAULTS, type Task, type TaskEvent } from '../../src/commands/task/types.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideTask, evolveTask);
const ORG = 'org_task';
const URL = 'https://example.com/hook';

const created: TaskEvent = decideTask({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, delay: '5m' } }, null, meta())[0]!;
const task = spec.stateAfter([created])!;
const at = (when: string) => meta(when);
const AN_HOUR_LATER = later(3_600_000);

describe('task decider: create', () => {
  test('a task with a delay: defaults filled in, name from the URL, first run now + delay', () => {
    const execution = { id: 'exe_1', scheduled_for: later(300_000), callback_url: null };
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, delay: '5m' } }).then([{
      type: 'TaskCreated',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: {
        task: { ...TASK_DEFAULTS, name: 'example.com/hook', url: URL, delay: '5m', id: 'tsk_1', org_id: ORG, created_at: NOW, updated_at: NOW, pending_execution: execution },
        execution,
      },
    }]);
  });

  test('the delay is a service-counted wait: JETCRON_TIME_SCALE shortens it', () => {
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, delay: '2m' } }, meta(NOW, 0.001))
      .thenMatches([{ data: { execution: { scheduled_for: later(120) } } }]);
  });

  test('run_at is a wall-clock instant; none of delay and run_at: due now', () => {
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, run_at: '2026-03-02T00:00:00+01:00' } })
      .thenMatches([{ data: { execution: { scheduled_for: '2026-03-01T23:00:00.000Z' } } }]);
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL } }).thenMatches([{ data: { execution: { scheduled_for: NOW } } }]);
  });

  test("a debounced create keeps its window's task id and run time", () => {
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL }, taskId: 'tsk_window', runAt: AN_HOUR_LATER })
      .thenMatches([{ data: { task: { id: 'tsk_window' }, execution: { id: 'exe_1', scheduled_for: AN_HOUR_LATER } } }]);
  });

  for (const [name, input, field] of [
    ['delay and run_at', { delay: '5s', run_at: AN_HOUR_LATER }, 'run_at'],
    ['a malformed delay', { delay: '5x' }, 'delay'],
    ['debounce with a delay', { debounce: '5s', debounce_key: 'k', lane: 'l', delay: '5s' }, 'delay'],
    ['debounce without debounce_key', { debounce: '5s', lane: 'l' }, 'debounce_key'],
    ['debounce_key without lane', { debounce: '5s', debounce_key: 'k' }, 'lane'],
    ['expected_status_codes that are not codes', { expected_status_codes: '200,abc' }, 'expected_status_codes'],
  ] as const) {
    test(`422: ${name}`, () => {
      spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'pro', input: { url: URL, ...input } }).thenRefuses({ status: 422, field });
    });
  }

  test('plan: a script needs Pro (403 naming the field, before any other rule); Pro stores it', () => {
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, script: 'x = 1', delay: '5x' } })
      .thenRefuses({ status: 403, field: 'script', message: 'Lua scripts need the Pro plan' });
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'free', input: { url: URL, script: null } }).thenMatches([{ type: 'TaskCreated' }]);
    spec.given([]).when({ type: 'CreateTask', orgId: ORG, plan: 'pro', input: { url: URL, script: 'x = 1' } })
      .thenMatches([{ type: 'TaskCreated', data: { task: { script: 'x = 1' } } }]);
  });
});

describe('task decider: changes', () => {
  test('update: fields replaced, a new run_at drops the delay and moves the pending run', () => {
    const expected: Task = { ...task, name: 'renamed', run_at: AN_HOUR_LATER, delay: null, updated_at: later(1000), pending_execution: { ...task.pending_execution!, scheduled_for: AN_HOUR_LATER } };
    spec.given([created]).when({ type: 'UpdateTask', plan: 'free', input: { run_at: AN_HOUR_LATER, name: 'renamed' } }, at(later(1000)))
      .then([{ type: 'TaskUpdated', id: 'evt_test', at: later(1000), org_id: ORG, data: { task: expected, changed: ['run_at', 'name'] } }]);
  });

  test('update: a field that is not about timing leaves the pending run where it was', () => {
    spec.given([created]).when({ type: 'UpdateTask', plan: 'free', input: { retry_attempts: 2 } })
      .thenMatches([{ data: { task: { retry_attempts: 2, pending_execution: task.pending_execution }, changed: ['retry_attempts'] } }]);
  });

  test('update: the same rules as create, and a script on Free is refused even for a task that does not exist', () => {
    spec.given([created]).when({ type: 'UpdateTask', plan: 'free', input: { debounce: '5s' } }).thenRefuses({ status: 422, field: 'debounce_key' });
    spec.given([]).when({ type: 'UpdateTask', plan: 'free', input: { script: 'x = 1' } }).thenRefuses({ status: 403, field: 'script' });
    spec.given([]).when({ type: 'UpdateTask', plan: 'pro', input: { script: 'x = 1' } }).thenRefuses({ status: 404, message: 'Task not found' });
  });

  test('delete, cancel: the task is gone; another change is 404', () => {
    spec.given([created]).when({ type: 'DeleteTask' }, at(later(1000))).then([{ type: 'TaskDeleted', id: 'evt_test', at: later(1000), org_id: ORG, data: { task: { ...task, updated_at: later(1000) } } }]);
    spec.given([created]).when({ type: 'CancelTask', reason: 'lane l cancelled' }).thenMatches([{ type: 'TaskCancelled', data: { reason: 'lane l cancelled' } }]);
    const deleted = decideTask({ type: 'DeleteTask' }, task, meta());
    const cancelled = decideTask({ type: 'CancelTask', reason: 'r' }, task, meta());
    for (const gone of [deleted, cancelled]) {
      spec.given([created, ...gone]).when({ type: 'DeleteTask' }).thenRefuses({ status: 404 });
      spec.given([created, ...gone]).when({ type: 'TriggerTask', callbackUrl: null }).thenRefuses({ status: 404 });
    }
  });

  test('trigger: a new execution due now with its own callback; the task is unchanged', () => {
    spec.given([created]).when({ type: 'TriggerTask', callbackUrl: 'https://example.com/cb' }).then([{
      type: 'TaskTriggered',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: { task, execution: { id: 'exe_1', scheduled_for: NOW, callback_url: 'https://example.com/cb' } },
    }]);
  });
});
