import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OwnedTasks } from '../src/commands/partition/owned-tasks.ts';
import { schedulePartition, taskPartition } from '../src/commands/partition/partition-of.ts';
import { decideSchedule } from '../src/commands/schedule/decide.ts';
import type { Schedule, ScheduleEvent } from '../src/commands/schedule/types.ts';
import { decideTask } from '../src/commands/task/decide.ts';
import type { Task, TaskEvent, TaskInput } from '../src/commands/task/types.ts';
import type { AttemptJob } from '../src/commands/execution/job.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import { adoptedResult, lateResult, type LateResult } from '../src/commands/execution/late-results.ts';
import { uniqueMeta } from './support/unique-meta.ts';

// Specs of a partition owner's state: given what the log says, what starts and what is recorded.
const P = 4;
const T0 = Date.parse('2026-11-25T12:00:00Z');
const meta = (nowMs = T0) => uniqueMeta(nowMs);

/** A log: each append is one message at the next sequence. */
function log() {
  let seq = 0;
  const messages: Array<{ seq: number; events: Array<TaskEvent | ExecutionEvent> }> = [];
  return {
    messages,
    put(events: Array<TaskEvent | ExecutionEvent>) {
      messages.push({ seq: ++seq, events });
      return seq;
    },
  };
}

function created(input: TaskInput & { url?: string }, org = 'org_a'): TaskEvent {
  const [event] = decideTask({ type: 'CreateTask', orgId: org, plan: 'pro', input: { url: 'https://example.com/x', ...input } }, null, meta());
  return event!;
}

function updated(task: Task, input: TaskInput): TaskEvent {
  return decideTask({ type: 'UpdateTask', plan: 'pro', input }, task, meta()).find((e) => e.type === 'TaskUpdated')!;
}

/** A partition that owns `event`'s task (any lane or task id lands in some partition). */
function ownerOf(event: TaskEvent): OwnedTasks {
  return new OwnedTasks(taskPartition(event.data.task, P), P);
}

function finished(job: AttemptJob, opts: { status?: 'success' | 'failed'; retryAt?: number; callback?: string | null; atMs?: number } = {}): ExecutionEvent {
  const at = new Date(opts.atMs ?? T0).toISOString();
  return {
    type: 'AttemptFinished',
    id: `${job.execution_id}.${job.attempt}.finished`,
    at,
    org_id: job.org_id,
    data: {
      execution_id: job.execution_id, source: job.source, attempt: job.attempt, status: opts.status ?? 'success', status_code: 200,
      error_message: null, scheduled_for: job.scheduled_for, started_at: at, finished_at: at, duration_ms: 1,
      request: { method: 'POST', url: job.request.url, headers: {}, body: null }, response_body: null, response_truncated: false,
      response_headers: null, script_logs: [], next_attempt_at: opts.retryAt ? new Date(opts.retryAt).toISOString() : null, final: !opts.retryAt,
      callback_url: opts.callback ?? null, push_callback_url: null, lane: job.lane,
    },
  };
}

const ids = (xs: Array<{ id: string }>) => xs.map((x) => x.id);
const executionOf = (e: TaskEvent) => (e.data as { execution: { id: string } }).execution.id;

test('a lane starts one execution at a time, in log order, the next only once the previous result is recorded', () => {
  const a = created({ lane: 'L' });
  const b = created({ lane: 'L' });
  const c = created({ lane: 'L' });
  const s = ownerOf(a);
  [a, b, c].forEach((e, i) => s.onTaskEvent(e, i + 1, 0));
  const first = s.take(T0);
  assert.deepEqual(ids(first), [executionOf(a)]);
  assert.deepEqual(s.take(T0 + 1000), [], 'nothing else while the first runs');
  s.onResult(finished(first[0]!.job));
  assert.deepEqual(ids(s.take(T0)), [executionOf(b)]);
});

test('a retry keeps its lane: the next execution waits through the retry and starts after the final result', () => {
  const a = created({ lane: 'L', retry_attempts: 2 });
  const b = created({ lane: 'L' });
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  s.onTaskEvent(b, 2, 0);
  const [run] = s.take(T0);
  s.onResult(finished(run!.job, { status: 'failed', retryAt: T0 + 5_000 }));
  assert.deepEqual(s.take(T0 + 4_999), [], 'the lane is held by the waiting retry');
  assert.equal(s.nextWakeAt(T0), T0 + 5_000);
  const [retry] = s.take(T0 + 5_000);
  assert.equal(retry!.id, executionOf(a));
  assert.equal(retry!.job.attempt, 2, 'the retry is the next attempt');
  s.onResult(finished(retry!.job));
  assert.deepEqual(ids(s.take(T0 + 5_000)), [executionOf(b)]);
});

test('lane-free executions start when due, all at once, in due order', () => {
  const later = created({ delay: '10s' });
  const s = new OwnedTasks(0, 1);
  const now1 = created({});
  const now2 = created({});
  s.onTaskEvent(later, 1, 0);
  s.onTaskEvent(now1, 2, 0);
  s.onTaskEvent(now2, 2, 1);
  assert.deepEqual(ids(s.take(T0)), [executionOf(now1), executionOf(now2)]);
  assert.equal(s.nextWakeAt(T0), T0 + 10_000);
  assert.deepEqual(ids(s.take(T0 + 10_000)), [executionOf(later)]);
});

test('a task of another partition is not held', () => {
  const a = created({ lane: 'somewhere' });
  const s = new OwnedTasks((taskPartition(a.data.task, P) + 1) % P, P);
  s.onTaskEvent(a, 1, 0);
  assert.equal(s.size, 0);
  assert.deepEqual(s.take(T0), []);
});

test('a disabled task is held, not started; enabling it starts it', () => {
  const a = created({ enabled: false });
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  assert.deepEqual(s.take(T0 + 86_400_000), []);
  assert.equal(s.nextWakeAt(T0), null, 'nothing to wake for');
  s.onTaskEvent(updated(a.data.task, { enabled: true }), 2, 0);
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(a)]);
});

test('a task update re-times its waiting execution and gives it the new definition', () => {
  const a = created({ delay: '1h' });
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  const moved = updated(a.data.task, { delay: '10s', url: 'https://example.com/new' });
  s.onTaskEvent(moved, 2, 0);
  const [run] = s.take(Date.parse((moved.data.task as Task).pending_execution!.scheduled_for));
  assert.equal(run?.id, executionOf(a));
  assert.equal(run!.job.request.url, 'https://example.com/new');
});

test('a cancelled task: what waits is recorded cancelled; what runs ends after its attempt, not retried', () => {
  const a = created({ lane: 'L', retry_attempts: 3 });
  const b = created({ lane: 'L' });
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  s.onTaskEvent(b, 2, 0);
  const [run] = s.take(T0);
  s.onTaskEvent({ type: 'TaskCancelled', id: 'evt_c1', at: new Date(T0).toISOString(), org_id: 'org_a', data: { task: a.data.task, reason: 'lane L cancelled' } }, 3, 0);
  s.onTaskEvent({ type: 'TaskCancelled', id: 'evt_c2', at: new Date(T0).toISOString(), org_id: 'org_a', data: { task: b.data.task, reason: 'lane L cancelled' } }, 4, 0);
  const cancels = s.takeCancels();
  assert.deepEqual(cancels.map((e) => [e.type, e.data.execution_id]), [['ExecutionCancelled', executionOf(b)]]);
  assert.deepEqual(s.takeCancels(), [], 'each cancel is handed out once');
  // The running one fails asking for a retry: its task is gone, so it is cancelled instead.
  s.onResult(finished(run!.job, { status: 'failed', retryAt: T0 + 1000 }));
  assert.deepEqual(s.takeCancels().map((e) => e.data.execution_id), [executionOf(a)]);
  for (const e of cancels) s.onResult(e);
  assert.equal(s.size, 1, 'only the one whose cancel is not yet recorded');
});

test('a completion callback is due when the execution ends, and retried as its record says', () => {
  const a = created({ callback_url: 'https://example.com/cb' });
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  const [run] = s.take(T0);
  s.onResult(finished(run!.job, { callback: 'https://example.com/cb', atMs: T0 + 10 }));
  const [cb] = s.take(T0 + 10);
  assert.equal(cb?.phase, 'callback');
  assert.equal(cb!.callback!.attempt, 1);
  const tried = (attempt: number, next: number | null): ExecutionEvent => ({
    type: 'CallbackAttempted', id: `${cb!.id}.cb${attempt}`, at: new Date(T0).toISOString(), org_id: 'org_a',
    data: { execution_id: cb!.id, url: cb!.callback!.url, attempt, status_code: 500, error_message: 'HTTP 500', next_attempt_at: next === null ? null : new Date(next).toISOString(), job: { ...cb!.callback!, attempt } },
  });
  s.onResult(tried(1, T0 + 5_000));
  assert.deepEqual(s.take(T0 + 4_999), []);
  const [again] = s.take(T0 + 5_000);
  assert.equal(again!.callback!.attempt, 2);
  s.onResult(tried(2, null));
  assert.equal(s.size, 0);
});

test('a takeover that reads the same log holds the same state: a lane held by a retry stays held', () => {
  const l = log();
  const a = created({ lane: 'L', retry_attempts: 2 });
  const b = created({ lane: 'L' });
  const live = ownerOf(a);
  for (const e of [a, b]) live.onTaskEvent(e, l.put([e]), 0);
  const [run] = live.take(T0);
  const result = finished(run!.job, { status: 'failed', retryAt: T0 + 60_000 });
  live.onResult(result);
  l.put([result]);

  // The next owner replays the log: task events, then the results of the partition's commits.
  const next = ownerOf(a);
  for (const m of l.messages) {
    m.events.forEach((e, i) => (e.type.startsWith('Task') ? next.onTaskEvent(e as TaskEvent, m.seq, i) : next.onResult(e as ExecutionEvent)));
  }
  assert.deepEqual(next.take(T0 + 1_000), [], 'b must not start: a still holds the lane');
  assert.deepEqual(live.take(T0 + 1_000), []);
  const [retry] = next.take(T0 + 60_000);
  assert.equal(retry!.id, executionOf(a));
  assert.equal(retry!.job.attempt, 2);
});

test('a takeover re-runs, under its own id, an execution whose result was never recorded', () => {
  const a = created({});
  const live = ownerOf(a);
  live.onTaskEvent(a, 1, 0);
  const [run] = live.take(T0);
  const next = ownerOf(a);
  next.onTaskEvent(a, 1, 0);
  const [again] = next.take(T0);
  assert.equal(again!.id, run!.id);
  assert.equal(again!.job.attempt, 1);
});

test('the lowest origin is the oldest live execution: a takeover reads from there', () => {
  const a = created({ delay: '1h' });
  const b = created({});
  const s = new OwnedTasks(0, 1);
  s.onTaskEvent(a, 10, 0);
  s.onTaskEvent(b, 11, 0);
  assert.equal(s.lowestOrigin(), 10);
  const [run] = s.take(T0);
  s.onResult(finished(run!.job));
  assert.equal(s.lowestOrigin(), 10, 'a still waits');
  s.onTaskEvent({ type: 'TaskDeleted', id: 'evt_d', at: new Date(T0).toISOString(), org_id: 'org_a', data: { task: a.data.task } }, 12, 0);
  for (const e of s.takeCancels()) s.onResult(e);
  assert.equal(s.lowestOrigin(), null);
});

// A fenced owner's late results (issue 34): recorded on the execution's own subject, they
// change no state; the owner adopts one only while the execution waits for that attempt.
test('a late result of the attempt a lane head waits for is adopted: the head comes up with it to record, not to send', () => {
  const a = created({ lane: 'L', retry_attempts: 2 });
  const b = created({ lane: 'L' });
  const s = ownerOf(a);
  [a, b].forEach((e, i) => s.onTaskEvent(e, i + 1, 0));
  const late = lateResult(finished(s.get(executionOf(a))!.job) as LateResult);
  s.onResultElsewhere(late);
  const [head] = s.take(T0);
  assert.equal(head!.id, executionOf(a));
  assert.equal(head!.adopt, late, 'recorded as this owner\'s result instead of a send');
  s.onResult(adoptedResult(late));
  assert.equal(s.get(executionOf(a)), undefined, 'the adopted success ends it');
  assert.deepEqual(ids(s.take(T0)), [executionOf(b)], 'and the lane moves on');
});

test('a late result changes nothing once the owner sent the execution itself, settled it, or moved on to a later attempt', () => {
  const a = created({ lane: 'L', retry_attempts: 2 });
  const b = created({ lane: 'L' });
  const s = ownerOf(a);
  [a, b].forEach((e, i) => s.onTaskEvent(e, i + 1, 0));
  const [head] = s.take(T0);
  const firstJob = head!.job;
  // Sending it now: a late failure with a retry is not this owner's state.
  s.onResultElsewhere(lateResult(finished(firstJob, { status: 'failed', retryAt: T0 + 1000 }) as LateResult));
  assert.equal(head!.adopt, null);
  // Its own result: a retry of attempt 2; a late result of attempt 1 then is history.
  s.onResult(finished(firstJob, { status: 'failed', retryAt: T0 + 1000 }));
  s.onResultElsewhere(lateResult(finished(firstJob) as LateResult));
  assert.equal(s.get(executionOf(a))!.adopt, null, 'attempt 2 waits; the late attempt 1 is not adopted');
  assert.deepEqual(s.take(T0 + 500), [], 'the retry holds the lane until its time');
  const [retry] = s.take(T0 + 1000);
  assert.equal(retry!.job.attempt, 2);
  s.onResult(finished(retry!.job));
  // Settled: a late result of it, read after, leaves it ended and the lane open.
  s.onResultElsewhere(lateResult(finished(retry!.job, { status: 'failed', retryAt: T0 + 5000 }) as LateResult));
  assert.equal(s.get(executionOf(a)), undefined);
  assert.deepEqual(ids(s.take(T0 + 1000)), [executionOf(b)]);
});

test('an unmarked result on an execution\'s own subject (DISPATCH\'s, before the owners) applies as any result', () => {
  const a = created({});
  const s = ownerOf(a);
  s.onTaskEvent(a, 1, 0);
  s.onResultElsewhere(finished(s.get(executionOf(a))!.job));
  assert.equal(s.get(executionOf(a)), undefined);
  assert.deepEqual(s.take(T0), []);
});

// Schedules on the partition owners (issue 35).
function scheduleOf(cron = '* * * * *') {
  const [e] = decideSchedule({ type: 'CreateSchedule', orgId: 'org_a', plan: 'pro', input: { url: 'https://example.com/tick', cron, retry_attempts: 2 } }, null, meta());
  return e as Extract<ScheduleEvent, { type: 'ScheduleCreated' }>;
}
const schedulesOwner = (s: Schedule) => new OwnedTasks(schedulePartition(s.org_id, s.id, P), P);

test('a schedule: its next tick comes due; the recorded tick plans one execution, run at once, and the next tick is armed', () => {
  const created = scheduleOf();
  const s0 = created.data.schedule;
  const owner = schedulesOwner(s0);
  owner.onScheduleEvent(created, 1);
  const due = Date.parse(s0.next_run_at!);
  assert.equal(owner.nextWakeAt(due - 10_000), due);
  assert.deepEqual(owner.schedules.dueTicks(due - 1), []);
  const [tick] = owner.schedules.dueTicks(due);
  assert.equal(tick!.tickAt, s0.next_run_at);
  assert.deepEqual(owner.schedules.dueTicks(due), [], 'handed out once');
  const [ticked] = decideSchedule({ type: 'RecordTick', tickAt: tick!.tickAt }, s0, meta(due + 5));
  owner.onScheduleEvent(ticked as ScheduleEvent, 2);
  owner.onScheduleEvent(ticked as ScheduleEvent, 2); // read twice: one execution
  const started = owner.take(due + 5);
  assert.equal(started.length, 1);
  assert.equal(started[0]!.job.source.type, 'schedule');
  assert.equal(started[0]!.job.next_tick_at, (ticked as Extract<ScheduleEvent, { type: 'ScheduleTicked' }>).data.next_run_at);
  assert.equal(owner.schedules.nextDueAt(), Date.parse((ticked as Extract<ScheduleEvent, { type: 'ScheduleTicked' }>).data.next_run_at));
});

test('a takeover knows each schedule from its last event without running its last tick again; a retry sends the schedule as it is now; a delete cancels what waits', () => {
  const created = scheduleOf();
  const s0 = created.data.schedule;
  const due = Date.parse(s0.next_run_at!);
  const [ticked] = decideSchedule({ type: 'RecordTick', tickAt: s0.next_run_at! }, s0, meta(due));
  const taker = schedulesOwner(s0);
  taker.knowSchedule(ticked as ScheduleEvent, 2);
  assert.deepEqual(taker.take(due + 1), [], 'the last tick is known, not planned');

  const owner = schedulesOwner(s0);
  owner.onScheduleEvent(created, 1);
  owner.onScheduleEvent(ticked as ScheduleEvent, 2);
  const [run] = owner.take(due);
  owner.onResult(finished(run!.job, { status: 'failed', retryAt: due + 1000 }));
  const changed = decideSchedule({ type: 'UpdateSchedule', plan: 'pro', input: { url: 'https://example.com/moved' } }, (ticked as ScheduleEvent).data.schedule, meta(due + 10));
  owner.onScheduleEvent(changed[0]!, 3);
  const [retry] = owner.take(due + 1000);
  assert.equal(retry!.job.attempt, 2);
  assert.equal(retry!.job.request.url, 'https://example.com/moved');
  owner.onResult(finished(retry!.job, { status: 'failed', retryAt: due + 5000 }));
  owner.onScheduleEvent(decideSchedule({ type: 'DeleteSchedule' }, changed[0]!.data.schedule, meta(due + 20))[0]!, 4);
  const [cancel] = owner.takeCancels();
  assert.equal(cancel!.type, 'ExecutionCancelled');
  assert.equal(owner.schedules.nextDueAt(), null, 'a deleted schedule ticks no more');
});
