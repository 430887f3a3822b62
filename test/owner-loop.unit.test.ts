// The partition owner's loop as specs: given the events it read and the results it
// recorded, when a turn runs at a time (`OwnedTasks.step`), then what it sends, what it
// records, which ticks it records and when it looks again. No NATS, no sleeps: the
// loop in src/owners/task-owner.ts only carries out what a step returns.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OwnedTasks, type OwnerStep } from '../src/commands/partition/owned-tasks.ts';
import { schedulePartition, taskPartition } from '../src/commands/partition/partition-of.ts';
import { decideSchedule } from '../src/commands/schedule/decide.ts';
import type { ScheduleEvent } from '../src/commands/schedule/types.ts';
import { decideTask } from '../src/commands/task/decide.ts';
import type { Task, TaskEvent, TaskInput } from '../src/commands/task/types.ts';
import type { AttemptJob } from '../src/commands/execution/job.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import { uniqueMeta } from './support/unique-meta.ts';

const P = 4;
const T0 = Date.parse('2026-11-25T12:00:00Z');
const SECOND = 1000;

const createTask = (input: TaskInput = {}, at = T0): TaskEvent =>
  decideTask({ type: 'CreateTask', orgId: 'org_a', plan: 'pro', input: { url: 'https://example.com/x', ...input } }, null, uniqueMeta(at))[0]!;
const taskOf = (e: TaskEvent) => e.data.task as Task;
const executionOf = (e: TaskEvent) => (e.data as { execution: { id: string } }).execution.id;

function result(job: AttemptJob, ok: boolean, atMs: number, retryAt?: number): ExecutionEvent {
  const at = new Date(atMs).toISOString();
  return {
    type: 'AttemptFinished', id: `${job.execution_id}.${job.attempt}.finished`, at, org_id: job.org_id,
    data: {
      execution_id: job.execution_id, source: job.source, attempt: job.attempt, status: ok ? 'success' : 'failed', status_code: ok ? 200 : 503,
      error_message: ok ? null : 'HTTP 503', scheduled_for: job.scheduled_for, started_at: at, finished_at: at, duration_ms: 1,
      request: { method: 'POST', url: job.request.url, headers: {}, body: null }, response_body: null, response_truncated: false,
      response_headers: null, script_logs: [], next_attempt_at: retryAt ? new Date(retryAt).toISOString() : null, final: !retryAt,
      callback_url: job.callback_url, push_callback_url: null, lane: job.lane,
    },
  };
}

/** An owner fed as the loop feeds it: events read at growing sequences, results applied once recorded. */
function owner(partition: number) {
  const state = new OwnedTasks(partition, P);
  let seq = 0;
  const spec = {
    state,
    read(...events: Array<TaskEvent | ScheduleEvent>) {
      seq++;
      events.forEach((e, i) => {
        if (e.type.startsWith('Schedule')) state.onScheduleEvent(e as ScheduleEvent, seq, i);
        else state.onTaskEvent(e as TaskEvent, seq, i);
      });
      return spec;
    },
    recorded(...events: ExecutionEvent[]) {
      for (const e of events) state.onResult(e);
      return spec;
    },
    turn(now: number): OwnerStep {
      return state.step(now);
    },
  };
  return spec;
}

const sends = (s: OwnerStep) => s.starts.map((e) => `${e.id}#${e.job.attempt}`);

describe('the owner loop, one turn at a time', () => {
  test('a task due now is sent at once; nothing else is due, so no timer', () => {
    const t = createTask();
    const o = owner(taskPartition(taskOf(t), P)).read(t);
    const turn = o.turn(T0);
    assert.deepEqual(sends(turn), [`${executionOf(t)}#1`]);
    assert.deepEqual([turn.cancels, turn.ticks, turn.handoffs, turn.wakeAt], [[], [], [], null]);
    assert.deepEqual(sends(o.turn(T0 + SECOND)), [], 'sent once');
  });

  test('a delayed task: no send, a timer for its time; at its time, the send', () => {
    const t = createTask({ delay: '30s' });
    const due = Date.parse((t.data as { execution: { scheduled_for: string } }).execution.scheduled_for);
    const o = owner(taskPartition(taskOf(t), P)).read(t);
    const early = o.turn(T0);
    assert.deepEqual(sends(early), []);
    assert.equal(early.wakeAt, due);
    assert.deepEqual(sends(o.turn(due)), [`${executionOf(t)}#1`]);
  });

  test('a failed attempt with retries left: its result recorded, a timer for the retry, then attempt 2', () => {
    const t = createTask({ retry_attempts: 1 });
    const o = owner(taskPartition(taskOf(t), P)).read(t);
    const [run] = o.turn(T0).starts;
    const retryAt = T0 + 10 * SECOND;
    const after = o.recorded(result(run!.job, false, T0 + 5, retryAt)).turn(T0 + 10);
    assert.deepEqual(sends(after), []);
    assert.equal(after.wakeAt, retryAt);
    assert.deepEqual(sends(o.turn(retryAt)), [`${executionOf(t)}#2`]);
  });

  test('a lane: the second task is sent only in the turn after the first one\'s final result is recorded', () => {
    const a = createTask({ lane: 'L' });
    const b = createTask({ lane: 'L' });
    const o = owner(taskPartition(taskOf(a), P)).read(a, b);
    const first = o.turn(T0);
    assert.deepEqual(sends(first), [`${executionOf(a)}#1`]);
    assert.deepEqual(sends(o.turn(T0 + SECOND)), [], 'the lane is held');
    assert.deepEqual(sends(o.recorded(result(first.starts[0]!.job, true, T0 + 2)).turn(T0 + 2)), [`${executionOf(b)}#1`]);
  });

  test('a task deleted while its execution waits: the turn records its cancel and sends nothing', () => {
    const t = createTask({ delay: '1m' });
    const deleted = decideTask({ type: 'DeleteTask' }, taskOf(t), uniqueMeta(T0 + SECOND))[0]!;
    const turn = owner(taskPartition(taskOf(t), P)).read(t).read(deleted).turn(T0 + 2 * SECOND);
    assert.deepEqual(sends(turn), []);
    assert.deepEqual(turn.cancels.map((e) => [e.type, e.data.execution_id]), [['ExecutionCancelled', executionOf(t)]]);
  });

  test('a schedule: its tick is handed out in the turn it comes due, once; its recorded tick is sent in the next turn', () => {
    const [createdEvent] = decideSchedule({ type: 'CreateSchedule', orgId: 'org_a', plan: 'pro', input: { url: 'https://example.com/tick', cron: '* * * * *' } }, null, uniqueMeta(T0));
    const schedule = createdEvent!.data.schedule;
    const due = Date.parse(schedule.next_run_at!);
    const o = owner(schedulePartition('org_a', schedule.id, P)).read(createdEvent!);
    assert.equal(o.turn(T0).wakeAt, due);
    const turn = o.turn(due);
    assert.deepEqual(turn.ticks.map((t) => t.tickAt), [schedule.next_run_at]);
    assert.deepEqual(o.turn(due).ticks, [], 'handed out once');
    const [ticked] = decideSchedule({ type: 'RecordTick', tickAt: turn.ticks[0]!.tickAt }, schedule, uniqueMeta(due + 3));
    const next = o.read(ticked as ScheduleEvent).turn(due + 3);
    assert.equal(next.starts.length, 1);
    assert.equal(next.starts[0]!.job.source.id, schedule.id);
    assert.equal(next.wakeAt, Date.parse((ticked as ScheduleEvent).data.schedule.next_run_at!), 'the next tick armed');
  });
});
