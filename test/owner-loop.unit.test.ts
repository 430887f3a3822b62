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

/** A cancellation's reason (`ExecutionCancelled`). */
const reasonOf = (e: { data: object }) => (e.data as { reason?: string }).reason;
import { decideGroupTrigger } from '../src/commands/execution/retry.ts';
import type { Schedule } from '../src/commands/schedule/types.ts';

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
function owner(partition: number, readsFrom = 0) {
  const state = new OwnedTasks(partition, P, readsFrom);
  let seq = Math.max(0, readsFrom - 1);
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

// A bulk job's retries are decided on each source's state as the worker read it (at
// `source_seq`) and committed together on the jobs subject, where no guard of the
// source's subject covers them: what the owner read of the source since then decides.
describe('a bulk job\'s trigger, decided on a source state read earlier', () => {
  const ids = (n: number) => ({ eventId: `evt_job${n}`, executionId: `exe_job${n}` });
  const retryOfTask = (task: Task, sourceSeq: number, n = 1, at = T0 + 5 * SECOND) =>
    decideGroupTrigger({ type: 'TriggerTask', taskId: task.id, retryOf: `exe_old${n}`, callbackUrl: null }, { state: task, seq: sourceSeq }, ids(n), uniqueMeta(at)) as TaskEvent;

  test('its task deleted after that state: the run is cancelled unsent, its reason recorded', () => {
    const t = createTask({ delay: '1h' });
    const o = owner(taskPartition(taskOf(t), P)).read(t);
    o.read(decideTask({ type: 'DeleteTask' }, taskOf(t), uniqueMeta(T0 + SECOND))[0]!);
    o.turn(T0 + 2 * SECOND);
    const turn = o.read(retryOfTask(taskOf(t), 1)).turn(T0 + 6 * SECOND);
    assert.deepEqual(sends(turn), []);
    assert.deepEqual(turn.cancels.map((e) => [e.data.execution_id, reasonOf(e)]), [['exe_job1', 'task deleted']]);
    assert.deepEqual(sends(o.turn(T0 + 3_600 * SECOND)), [], 'never sent');
  });

  test('its task updated after that state: the run sends the state it was decided on; the task held stays the newer one', () => {
    const t = createTask({ delay: '1h' });
    const o = owner(taskPartition(taskOf(t), P)).read(t);
    const updated = decideTask({ type: 'UpdateTask', plan: 'pro', input: { url: 'https://example.com/new' } }, taskOf(t), uniqueMeta(T0 + SECOND))[0]!;
    o.read(updated);
    const turn = o.read(retryOfTask(taskOf(t), 1)).turn(T0 + 6 * SECOND);
    assert.deepEqual(turn.starts.map((e) => [e.id, e.job.request.url]), [['exe_job1', 'https://example.com/x']]);
    const due = Date.parse(taskOf(t).pending_execution!.scheduled_for);
    assert.deepEqual(o.turn(due).starts.map((e) => [e.id, e.job.request.url]), [[executionOf(t), 'https://example.com/new']]);
  });

  test('decided on a state older than the owner\'s reading (a takeover): the task is read first, and a delete found cancels the run', () => {
    const t = createTask();
    const o = owner(taskPartition(taskOf(t), P), 100);
    const trigger = retryOfTask(taskOf(t), 1);
    assert.equal(o.state.needsTask(trigger), true, 'the owner cannot tell from what it read');
    const deleted = decideTask({ type: 'DeleteTask' }, taskOf(t), uniqueMeta(T0 + SECOND))[0]!;
    o.state.learnTask(taskOf(t).id, deleted, 50);
    assert.equal(o.state.needsTask(trigger), false);
    const turn = o.read(trigger).turn(T0 + 6 * SECOND);
    assert.deepEqual([sends(turn), turn.cancels.map((e) => reasonOf(e))], [[], ['task deleted']]);

    const alive = createTask();
    const other = owner(taskPartition(taskOf(alive), P), 100);
    other.state.learnTask(taskOf(alive).id, alive, 1);
    assert.deepEqual(sends(other.read(retryOfTask(taskOf(alive), 1, 2)).turn(T0 + 6 * SECOND)), ['exe_job2#1'], 'still there: sent');
  });

  test('a trigger on its task\'s own subject (no source_seq) asks for nothing and is sent', () => {
    const t = createTask({ delay: '1h' });
    const o = owner(taskPartition(taskOf(t), P), 100).read(t);
    const own = decideTask({ type: 'TriggerTask', callbackUrl: null }, taskOf(t), uniqueMeta(T0 + SECOND))[0]!;
    assert.equal(o.state.needsTask(own), false);
    assert.deepEqual(o.read(own).turn(T0 + 2 * SECOND).starts.length, 1);
  });

  test('its schedule deleted after that state: the run is cancelled unsent, the deleted schedule stays deleted', () => {
    const [created] = decideSchedule({ type: 'CreateSchedule', orgId: 'org_a', plan: 'pro', input: { url: 'https://example.com/tick', cron: '0 0 1 1 *' } }, null, uniqueMeta(T0));
    const schedule = created!.data.schedule as Schedule;
    const o = owner(schedulePartition('org_a', schedule.id, P)).read(created!);
    o.read(decideSchedule({ type: 'DeleteSchedule' }, schedule, uniqueMeta(T0 + SECOND))[0]!);
    const trigger = decideGroupTrigger({ type: 'TriggerSchedule', scheduleId: schedule.id, retryOf: 'exe_old', callbackUrl: null }, { state: schedule, seq: 1 }, ids(3), uniqueMeta(T0 + 5 * SECOND)) as ScheduleEvent;
    const turn = o.read(trigger).turn(T0 + 6 * SECOND);
    assert.deepEqual([sends(turn), turn.cancels.map((e) => [e.data.execution_id, reasonOf(e)])], [[], [['exe_job3', 'schedule deleted']]]);
    assert.equal(o.state.schedules.get(schedule.id), null, 'the trigger\'s older state does not bring it back');
  });
});
