/** The organization's bulk retry jobs as one aggregate (issue 36): acceptance, steps, cancel. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideJobs, evolveJobs } from '../../src/commands/job/decide.ts';
import type { JobCommand, JobEvent, RetryJob } from '../../src/commands/job/types.ts';
import { ApiError } from '../../src/lib/errors.ts';
import { meta } from './spec.ts';

const accept = (jobId: string, ids: string[]): JobCommand => ({ type: 'AcceptRetryJob', orgId: 'org_1', jobId, filter: { dead: true }, executionIds: ids });
const taken = (position: number, outcome: 'retried' | 'skipped') =>
  ({ execution_id: `exe_${position}`, outcome, retry_id: outcome === 'retried' ? `exe_r${position}` : null, reason: outcome === 'skipped' ? 'already retried' : null });
const step = (jobId: string, position: number, outcome: 'retried' | 'skipped' = 'retried'): JobCommand =>
  ({ type: 'RecordJobSteps', jobId, position, steps: [taken(position, outcome)] });
const run = (state: RetryJob | null, command: JobCommand): { events: JobEvent[]; state: RetryJob | null } => {
  const events = decideJobs(command, state, meta());
  return { events, state: events.reduce<RetryJob | null>(evolveJobs, state) };
};
const refusedWith = (state: RetryJob | null, command: JobCommand) => {
  try {
    decideJobs(command, state, meta());
  } catch (err) {
    assert.ok(err instanceof ApiError);
    return err.status;
  }
  return assert.fail('not refused');
};

test('a job takes its set position by position, counts retried and skipped, and is done after the last', () => {
  let { state } = run(null, accept('rjb_1', ['exe_0', 'exe_1']));
  assert.deepEqual([state!.status, state!.total, state!.position], ['running', 2, 0]);
  ({ state } = run(state, step('rjb_1', 0)));
  ({ state } = run(state, step('rjb_1', 1, 'skipped')));
  assert.deepEqual([state!.status, state!.done, state!.skipped, state!.position], ['done', 1, 1, 2]);
  assert.ok(state!.finished_at);
});

test('one event records a group of steps: the position moves past all of them, each counted, done after the last', () => {
  let { state } = run(null, accept('rjb_1', ['exe_0', 'exe_1', 'exe_2', 'exe_3', 'exe_4']));
  let events: JobEvent[];
  ({ events, state } = run(state, { type: 'RecordJobSteps', jobId: 'rjb_1', position: 0, steps: [taken(0, 'retried'), taken(1, 'skipped'), taken(2, 'retried')] }));
  assert.equal(events.length, 1);
  const stepped = events[0]!;
  assert.deepEqual(stepped.type === 'RetryJobStepped' && stepped.data.steps.map((s) => s.execution_id), ['exe_0', 'exe_1', 'exe_2']);
  assert.deepEqual([state!.status, state!.position, state!.done, state!.skipped], ['running', 3, 2, 1]);
  assert.deepEqual(run(state, { type: 'RecordJobSteps', jobId: 'rjb_1', position: 0, steps: [taken(0, 'retried')] }).events, [], 'a group from a position already taken is nothing');
  assert.throws(() => decideJobs({ type: 'RecordJobSteps', jobId: 'rjb_1', position: 3, steps: [taken(3, 'retried'), taken(4, 'retried'), taken(5, 'retried')] }, state, meta()), /3 steps from position 3 of 5/);
  ({ state } = run(state, { type: 'RecordJobSteps', jobId: 'rjb_1', position: 3, steps: [taken(3, 'skipped'), taken(4, 'retried')] }));
  assert.deepEqual([state!.status, state!.position, state!.done, state!.skipped], ['done', 5, 3, 2]);
  assert.ok(state!.finished_at);
});

test('a step at a position already taken, of another job, or after a cancel is nothing: no execution is recorded twice', () => {
  let { state } = run(null, accept('rjb_1', ['exe_0', 'exe_1', 'exe_2']));
  ({ state } = run(state, step('rjb_1', 0)));
  assert.deepEqual(run(state, step('rjb_1', 0)).events, []);
  assert.deepEqual(run(state, step('rjb_2', 1)).events, []);
  const cancelled = run(state, { type: 'CancelJob', jobId: 'rjb_1' }).state;
  assert.equal(cancelled!.status, 'cancelled');
  assert.deepEqual(run(cancelled, step('rjb_1', 1)).events, []);
});

test('one running job per organization (409); the same job id again is nothing; an empty set is done at once; a cancel of a finished job is nothing', () => {
  const { state } = run(null, accept('rjb_1', ['exe_0']));
  assert.equal(refusedWith(state, accept('rjb_2', ['exe_9'])), 409);
  assert.deepEqual(run(state, accept('rjb_1', ['exe_0'])).events, []);
  const empty = run(null, accept('rjb_3', [])).state!;
  assert.equal(empty.status, 'done');
  assert.deepEqual(run(empty, { type: 'CancelJob', jobId: 'rjb_3' }).events, [], 'a finished job stays as it is');
  assert.deepEqual(run(state, { type: 'CancelJob', jobId: 'rjb_other' }).events, []);
});
