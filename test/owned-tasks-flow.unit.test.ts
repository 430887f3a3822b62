import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OwnedTasks } from '../src/commands/partition/owned-tasks.ts';
import { flowKeyPartition, taskPartition } from '../src/commands/partition/partition-of.ts';
import { decideTask } from '../src/commands/task/decide.ts';
import type { TaskEvent, TaskInput } from '../src/commands/task/types.ts';
import type { AttemptJob } from '../src/commands/execution/job.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { FlowKeyEvent } from '../src/commands/flow-control/types.ts';
import { uniqueMeta } from './support/unique-meta.ts';

// Specs of a partition owner's flow-control keys: given what the log says, what starts.
const P = 4;
const T0 = Date.parse('2026-11-25T12:00:00Z');
const meta = (nowMs = T0) => uniqueMeta(nowMs);

const flow = (key: string, limits: { parallelism?: number; rate?: number; period?: string }) => ({ flow_control: { key, ...limits } });

function created(input: TaskInput, org = 'org_a'): TaskEvent {
  const [event] = decideTask({ type: 'CreateTask', orgId: org, plan: 'pro', input: { url: 'https://example.com/x', ...input } }, null, meta());
  return event!;
}

function finished(job: AttemptJob, opts: { status?: 'success' | 'failed'; retryAt?: number; startedAt?: number } = {}): ExecutionEvent {
  const at = new Date(opts.startedAt ?? T0).toISOString();
  return {
    type: 'AttemptFinished', id: `${job.execution_id}.${job.attempt}.finished`, at, org_id: job.org_id,
    data: {
      execution_id: job.execution_id, source: job.source, attempt: job.attempt, status: opts.status ?? 'success', status_code: 200,
      error_message: null, scheduled_for: job.scheduled_for, started_at: at, finished_at: at, duration_ms: 1,
      request: { method: 'POST', url: job.request.url, headers: {}, body: null }, response_body: null, response_truncated: false,
      response_headers: null, script_logs: [], next_attempt_at: opts.retryAt ? new Date(opts.retryAt).toISOString() : null, final: !opts.retryAt,
      callback_url: null, push_callback_url: null, lane: job.lane,
    },
  };
}

const paused = (org: string, key: string, yes = true): FlowKeyEvent => ({
  type: yes ? 'FlowControlPaused' : 'FlowControlResumed', id: meta().eventId, at: new Date(T0).toISOString(), org_id: org, data: { key },
});

const ids = (xs: Array<{ id: string }>) => xs.map((x) => x.id);
const executionOf = (e: TaskEvent) => (e.data as { execution: { id: string } }).execution.id;
const ownerOfKey = (key: string, org = 'org_a') => new OwnedTasks(flowKeyPartition(org, key, P), P);

test('every task naming a key lands in the key\'s partition, whatever its id', () => {
  const tasks = Array.from({ length: 12 }, () => created(flow('k', { parallelism: 2 })));
  assert.equal(new Set(tasks.map((t) => taskPartition(t.data.task, P))).size, 1);
  assert.equal(taskPartition(tasks[0]!.data.task, P), flowKeyPartition('org_a', 'k', P));
});

test('parallelism: at most N in flight, the next as soon as one ends, in log order', () => {
  const tasks = Array.from({ length: 5 }, () => created(flow('k', { parallelism: 2 })));
  const s = ownerOfKey('k');
  tasks.forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  const first = s.take(T0);
  assert.deepEqual(ids(first), tasks.slice(0, 2).map(executionOf));
  assert.deepEqual(s.take(T0 + 1), []);
  s.onResult(finished(first[1]!.job));
  assert.deepEqual(ids(s.take(T0 + 2)), [executionOf(tasks[2]!)]);
});

test('a retry waiting for its time holds no slot: the next execution of the key starts', () => {
  const a = created({ ...flow('k', { parallelism: 1 }), retry_attempts: 2 });
  const b = created(flow('k', { parallelism: 1 }));
  const s = ownerOfKey('k');
  s.onTaskEvent(a, 1, 0);
  s.onTaskEvent(b, 2, 0);
  const [run] = s.take(T0);
  s.onResult(finished(run!.job, { status: 'failed', retryAt: T0 + 5_000 }));
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(b)], 'b starts while a waits for its retry');
  assert.deepEqual(s.take(T0 + 5_000), [], 'a\'s retry waits for the slot b holds');
  s.onResult(finished(s.get(executionOf(b))!.job));
  assert.deepEqual(ids(s.take(T0 + 5_000)), [executionOf(a)]);
});

test('the latest create or update naming a key sets its limits', () => {
  const tasks = Array.from({ length: 6 }, () => created(flow('k', { parallelism: 1 })));
  const widen = created(flow('k', { parallelism: 3 }));
  const s = ownerOfKey('k');
  tasks.forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  assert.equal(s.take(T0).length, 1);
  s.onTaskEvent(widen, 10, 0);
  assert.equal(s.take(T0 + 1).length, 2, 'three in flight now');
});

test('two keys, and one key name in two organizations, never share limits', () => {
  const s = new OwnedTasks(0, 1);
  const a1 = created(flow('k', { parallelism: 1 }), 'org_a');
  const a2 = created(flow('k', { parallelism: 1 }), 'org_a');
  const b1 = created(flow('k', { parallelism: 1 }), 'org_b');
  const c1 = created(flow('other', { parallelism: 1 }), 'org_a');
  [a1, a2, b1, c1].forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  assert.deepEqual(new Set(ids(s.take(T0))), new Set([a1, b1, c1].map(executionOf)));
});

test('a paused key starts nothing and keeps what waits; a resume starts it; a pause read before the log (a takeover) holds', () => {
  const tasks = Array.from({ length: 3 }, () => created(flow('k', { parallelism: 5 })));
  const s = ownerOfKey('k');
  s.onFlowKeyEvent(paused('org_a', 'k'));
  tasks.forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  assert.deepEqual(s.take(T0 + 60_000), []);
  assert.deepEqual(s.flowKeys('org_a'), [{ key: 'k', waiting: 3, in_flight: 0, paused: true }]);
  assert.equal(s.nextWakeAt(T0), null, 'nothing to wake for while paused');
  s.onFlowKeyEvent(paused('org_a', 'k', false));
  assert.equal(s.take(T0).length, 3);
  assert.deepEqual(s.flowKeys('org_a'), [{ key: 'k', waiting: 0, in_flight: 3, paused: false }]);
  assert.deepEqual(s.flowKeys('org_b'), []);
});

test('rate: a start counts from its send, and a taken attempt not yet sent never leaves the window', () => {
  const tasks = Array.from({ length: 4 }, () => created(flow('r', { rate: 2, period: '1s' })));
  const s = ownerOfKey('r');
  tasks.forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  const first = s.take(T0);
  assert.equal(first.length, 2);
  // One is sent 300 ms late (a slow sign, a busy slot); the other only at T0+1500.
  s.began(first[0]!, T0 + 300);
  assert.deepEqual(s.take(T0 + 1_100), [], 'the late send counts from T0+300, the unsent one still counts');
  const third = s.take(T0 + 1_300);
  assert.equal(third.length, 1, 'the first left the window at T0+1300; the unsent one holds the other place');
  s.began(first[1]!, T0 + 1_500);
  s.began(third[0]!, T0 + 1_300);
  s.onResult(finished(first[0]!.job, { startedAt: T0 + 300 }));
  s.onResult(finished(first[1]!.job, { startedAt: T0 + 1_500 }));
  assert.deepEqual(s.take(T0 + 2_400), [], 'sent at T0+1300 and T0+1500: both in the window until T0+2500');
  assert.equal(s.take(T0 + 2_500).length, 1);
});

test('rate: an attempt not sent (host blocked) was no start', () => {
  const tasks = Array.from({ length: 2 }, () => created(flow('r', { rate: 1, period: '1m' })));
  const s = ownerOfKey('r');
  tasks.forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  const [a] = s.take(T0);
  s.notSent(a!);
  s.later(a!, T0 + 10_000);
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(tasks[1]!)]);
});

test('rate across a takeover: the starts read back from the log stay in the window', () => {
  const tasks = Array.from({ length: 3 }, () => created(flow('r', { rate: 2, period: '10s' })));
  const live = ownerOfKey('r');
  tasks.forEach((t, i) => live.onTaskEvent(t, i + 1, 0));
  const started = live.take(T0);
  const results = started.map((e) => finished(e.job, { startedAt: T0 }));
  const next = ownerOfKey('r');
  tasks.forEach((t, i) => next.onTaskEvent(t, i + 1, 0));
  for (const r of results) next.onResult(r);
  assert.deepEqual(next.take(T0 + 9_999), [], 'two started within the window before the takeover');
  assert.equal(next.take(T0 + 10_000).length, 1);
});

test('a lane or key moved by an update: the waiting execution stays; a new one goes to the new partition, never to both', () => {
  const a = created({ lane: 'x' });
  const moved = { ...a.data.task, lane: null, flow_control: { key: 'k', parallelism: 1, rate: null, period: '1s' } };
  const trigger: TaskEvent = { type: 'TaskTriggered', id: 'evt_t', at: a.at, org_id: 'org_a', data: { task: moved, execution: { id: 'exe_t', scheduled_for: a.at, callback_url: null } } };
  const holders = Array.from({ length: P }, (_, p) => new OwnedTasks(p, P));
  for (const h of holders) {
    h.onTaskEvent(a, 1, 0);
    h.onTaskEvent({ type: 'TaskUpdated', id: 'evt_u', at: a.at, org_id: 'org_a', data: { task: moved, changed: ['lane', 'flow_control'] } }, 2, 0);
    h.onTaskEvent(trigger, 3, 0);
  }
  const planners = holders.filter((h) => h.get('exe_t'));
  assert.equal(planners.length, 1, 'the triggered execution is held by one partition');
  assert.equal(planners[0]!.partition, flowKeyPartition('org_a', 'k', P));
  assert.equal(holders.filter((h) => h.get(executionOf(a))).length, 1);
});

test('sending: from its start to its result; a result read from elsewhere meanwhile is the owner\'s to ignore', () => {
  const keyed = created(flow('s', { parallelism: 1 }));
  const free = created({});
  const s = new OwnedTasks(0, 1);
  s.onTaskEvent(keyed, 1, 0);
  s.onTaskEvent(free, 2, 0);
  assert.equal(s.sending(executionOf(keyed)), false);
  const started = s.take(T0);
  assert.deepEqual(started.map((e) => s.sending(e.id)), [true, true]);
  for (const e of started) s.onResult(finished(e.job));
  assert.equal(s.sending(executionOf(keyed)), false);
  assert.equal(s.sending(executionOf(free)), false);
});

// A batch's lane task naming a key (the contract's "Batches", decided 2026-12-06): it
// is its lane's, one at a time and in order, and its lane's head waits for its key.
function inBatchLane(lane: string, input: TaskInput = {}, org = 'org_a'): TaskEvent {
  const [event] = decideTask({ type: 'CreateTask', orgId: org, plan: 'pro', input: { url: 'https://example.com/x', lane, ...input }, inBatch: true }, null, meta());
  return event!;
}

test('a lane\'s head naming a key starts only when the key has a free slot; the lane waits behind it', () => {
  const s = new OwnedTasks(0, 1);
  const single = created(flow('k', { parallelism: 1 }));
  const a = inBatchLane('l', flow('k', { parallelism: 1 }));
  const b = inBatchLane('l', flow('k', { parallelism: 1 }));
  [single, a, b].forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  assert.deepEqual(ids(s.take(T0)), [executionOf(single)], 'the key\'s one slot is the single task\'s; the lane\'s head waits for it');
  assert.deepEqual(s.flowKeys('org_a'), [{ key: 'k', waiting: 1, in_flight: 1, paused: false }]);
  s.onResult(finished(s.get(executionOf(single))!.job));
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(a)]);
  assert.deepEqual(s.take(T0 + 2), [], 'b waits for its lane');
  s.onResult(finished(s.get(executionOf(a))!.job));
  assert.deepEqual(ids(s.take(T0 + 3)), [executionOf(b)]);
});

test('a lane\'s head naming a rate-limited key waits for room in the rate', () => {
  const s = new OwnedTasks(0, 1);
  const [a, b] = [inBatchLane('l', flow('r', { rate: 1, period: '10s' })), inBatchLane('l', flow('r', { rate: 1, period: '10s' }))];
  [a, b].forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  const [run] = s.take(T0);
  assert.equal(run?.id, executionOf(a));
  s.onResult(finished(run!.job, { startedAt: T0 }));
  assert.deepEqual(s.take(T0 + 9_999), [], 'b is the lane\'s head, the key\'s window is full');
  assert.equal(s.nextWakeAt(T0 + 9_999), T0 + 10_000);
  assert.deepEqual(ids(s.take(T0 + 10_000)), [executionOf(b)]);
});

test('a paused key holds the lane\'s head naming it; lane tasks without the key are not held by it', () => {
  const s = new OwnedTasks(0, 1);
  const a = inBatchLane('l', flow('k', { parallelism: 5 }));
  const other = inBatchLane('m');
  s.onFlowKeyEvent(paused('org_a', 'k'));
  [a, other].forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  assert.deepEqual(ids(s.take(T0)), [executionOf(other)]);
  assert.deepEqual(s.flowKeys('org_a'), [{ key: 'k', waiting: 1, in_flight: 0, paused: true }]);
  s.onFlowKeyEvent(paused('org_a', 'k', false));
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(a)]);
});

test('a lane head\'s retry keeps its lane and frees its key\'s slot; the retry waits for the key again', () => {
  const s = new OwnedTasks(0, 1);
  const a = inBatchLane('l', { ...flow('k', { parallelism: 1 }), retry_attempts: 2 });
  const b = inBatchLane('l', flow('k', { parallelism: 1 }));
  const single = created(flow('k', { parallelism: 1 }));
  [a, b, single].forEach((t, i) => s.onTaskEvent(t, i + 1, 0));
  const [run] = s.take(T0);
  assert.equal(run?.id, executionOf(a));
  s.onResult(finished(run!.job, { status: 'failed', retryAt: T0 + 5_000 }));
  assert.deepEqual(ids(s.take(T0 + 1)), [executionOf(single)], 'the key\'s slot is free; b still waits for a, its lane\'s head');
  assert.deepEqual(s.take(T0 + 5_000), [], 'a\'s retry waits for the slot the single task holds');
  s.onResult(finished(s.get(executionOf(single))!.job));
  assert.deepEqual(ids(s.take(T0 + 5_001)), [executionOf(a)]);
  s.onResult(finished(s.get(executionOf(a))!.job));
  assert.deepEqual(ids(s.take(T0 + 5_002)), [executionOf(b)]);
});

test('a takeover holds a lane\'s gated head as its predecessor did: a result read back frees the key', () => {
  const a = inBatchLane('l', flow('k', { parallelism: 1 }));
  const b = inBatchLane('l', flow('k', { parallelism: 1 }));
  const live = new OwnedTasks(0, 1);
  [a, b].forEach((t, i) => live.onTaskEvent(t, i + 1, 0));
  const [run] = live.take(T0);
  const next = new OwnedTasks(0, 1);
  [a, b].forEach((t, i) => next.onTaskEvent(t, i + 1, 0));
  next.onResult(finished(run!.job));
  assert.deepEqual(ids(next.take(T0 + 1)), [executionOf(b)]);
  assert.deepEqual(next.flowKeys('org_a'), [{ key: 'k', waiting: 0, in_flight: 1, paused: false }]);
});

/** A lane of org_a whose partition is not the key's. */
function laneApartFrom(key: string): string {
  for (let i = 0; ; i++) if (taskPartition({ org_id: 'org_a', id: 'x', lane: `l${i}`, flow_control: null }, P) !== flowKeyPartition('org_a', key, P)) return `l${i}`;
}

/** Every partition's owner, fed the same log. */
function owners(events: TaskEvent[]) {
  const all = Array.from({ length: P }, (_, p) => new OwnedTasks(p, P));
  for (const h of all) events.forEach((e, i) => h.onTaskEvent(e, i + 1, 0));
  return all;
}

test('a lane in another partition than its key: its head is handed to the key\'s owner, which sends it within the key\'s limits', () => {
  const lane = laneApartFrom('k');
  const single = created(flow('k', { parallelism: 1 }));
  const a = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const b = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const all = owners([single, a, b]);
  const laneOwner = all[taskPartition(a.data.task, P)]!;
  const keyOwner = all[flowKeyPartition('org_a', 'k', P)]!;
  assert.deepEqual(ids(keyOwner.take(T0)), [executionOf(single)]);
  assert.deepEqual(laneOwner.take(T0), [], 'the lane\'s head is not sent by its lane\'s owner');
  const [handoff, ...more] = laneOwner.takeHandoffs();
  assert.deepEqual(more, []);
  assert.equal(handoff!.data.execution_id, executionOf(a));
  assert.deepEqual([handoff!.id, handoff!.data.key, handoff!.data.limits], [`${executionOf(a)}.handed.1`, 'k', { parallelism: 1, rate: null, period: '1s' }]);
  // Every owner reads the hand-off from the log; only the key's holds it.
  for (const h of all) h.onHandedToKey(handoff!, 10, 0);
  assert.equal(all.filter((h) => h.handedIn(executionOf(a))).length, 1);
  assert.deepEqual(keyOwner.take(T0 + 1), [], 'the key\'s one slot is the single task\'s');
  assert.deepEqual(keyOwner.flowKeys('org_a'), [{ key: 'k', waiting: 1, in_flight: 1, paused: false }]);
  keyOwner.onResult(finished(keyOwner.get(executionOf(single))!.job));
  const [sent] = keyOwner.take(T0 + 2);
  assert.equal(sent?.id, executionOf(a));
  assert.ok(keyOwner.handedIn(sent!.id));
  // Its result, on the execution's subject: over for the key's owner, applied by the lane's.
  const result = finished(sent!.job);
  for (const h of all) h.onResult(result);
  assert.equal(keyOwner.get(executionOf(a)), undefined);
  assert.deepEqual(keyOwner.flowKeys('org_a'), [{ key: 'k', waiting: 0, in_flight: 0, paused: false }]);
  assert.deepEqual(laneOwner.take(T0 + 3), []);
  assert.deepEqual(laneOwner.takeHandoffs().map((h) => h.data.execution_id), [executionOf(b)], 'the lane\'s next, once its head\'s result is in');
});

test('a handed head\'s retry: its lane holds it, and hands it over again when due; a stale result is ignored', () => {
  const lane = laneApartFrom('k');
  const a = inBatchLane(lane, { ...flow('k', { parallelism: 1 }), retry_attempts: 2 });
  const b = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const all = owners([a, b]);
  const laneOwner = all[taskPartition(a.data.task, P)]!;
  const keyOwner = all[flowKeyPartition('org_a', 'k', P)]!;
  laneOwner.take(T0);
  const [first] = laneOwner.takeHandoffs();
  keyOwner.onHandedToKey(first!, 10, 0);
  laneOwner.onHandedToKey(first!, 10, 0);
  const [sent] = keyOwner.take(T0);
  const failed = finished(sent!.job, { status: 'failed', retryAt: T0 + 5_000 });
  keyOwner.onResult(failed);
  laneOwner.onResult(failed);
  assert.deepEqual([laneOwner.take(T0 + 1), laneOwner.takeHandoffs()], [[], []], 'b waits: the retry keeps the lane');
  laneOwner.onResult(failed);
  assert.deepEqual(laneOwner.take(T0 + 4_999), [], 'the same result read again changes nothing');
  laneOwner.take(T0 + 5_000);
  const [second] = laneOwner.takeHandoffs();
  assert.deepEqual([second!.id, second!.data.job.attempt], [`${executionOf(a)}.handed.2`, 2]);
});

test('a handed head whose task is deleted while it waits for its key: the key\'s owner cancels it, and its lane goes on', () => {
  const lane = laneApartFrom('k');
  const a = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const b = inBatchLane(lane);
  const all = owners([a, b]);
  const laneOwner = all[taskPartition(a.data.task, P)]!;
  const keyOwner = all[flowKeyPartition('org_a', 'k', P)]!;
  keyOwner.onFlowKeyEvent(paused('org_a', 'k'));
  laneOwner.take(T0);
  const [handoff] = laneOwner.takeHandoffs();
  for (const h of all) h.onHandedToKey(handoff!, 10, 0);
  assert.deepEqual(keyOwner.take(T0), [], 'paused');
  const deleted: TaskEvent = { type: 'TaskDeleted', id: 'evt_del', at: a.at, org_id: 'org_a', data: { task: a.data.task } };
  for (const h of all) h.onTaskEvent(deleted, 11, 0);
  assert.deepEqual(laneOwner.takeCancels(), [], 'the lane\'s owner leaves a handed head to its key\'s owner');
  const [cancel, ...more] = keyOwner.takeCancels();
  assert.deepEqual([cancel?.type, cancel?.data.execution_id, more.length], ['ExecutionCancelled', executionOf(a), 0]);
  for (const h of all) h.onResult(cancel!);
  assert.deepEqual(ids(laneOwner.take(T0 + 1)), [executionOf(b)]);
});

test('a takeover of the lane\'s partition reads its predecessor\'s hand-off: the head stays handed, not handed twice', () => {
  const lane = laneApartFrom('k');
  const a = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const b = inBatchLane(lane, flow('k', { parallelism: 1 }));
  const laneP = taskPartition(a.data.task, P);
  const before = new OwnedTasks(laneP, P);
  [a, b].forEach((t, i) => before.onTaskEvent(t, i + 1, 0));
  before.take(T0);
  const [handoff] = before.takeHandoffs();
  const next = new OwnedTasks(laneP, P);
  [a, b].forEach((t, i) => next.onTaskEvent(t, i + 1, 0));
  next.onHandedToKey(handoff!, 10, 0);
  assert.deepEqual([next.take(T0 + 1), next.takeHandoffs()], [[], []]);
  next.onResult(finished(handoff!.data.job));
  next.take(T0 + 2);
  assert.deepEqual(next.takeHandoffs().map((h) => [h.id, h.data.execution_id]), [[`${executionOf(b)}.handed.1`, executionOf(b)]]);
});
