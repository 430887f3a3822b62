// Every payload rule, through the decider behind every path that creates or changes
// a resource: the rules live in the deciders, so no path can skip one.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideBatch, type BatchInput } from '../../src/commands/batch/decide.ts';
import { decideDebounce, type DebouncedInput } from '../../src/commands/debounce/decide.ts';
import { decideEndpoint, evolveEndpoint } from '../../src/commands/endpoint/decide.ts';
import type { EndpointInput } from '../../src/commands/endpoint/types.ts';
import { fold } from '../../src/commands/execute.ts';
import { decideMonitor, evolveMonitor } from '../../src/commands/monitor/decide.ts';
import type { MonitorSpec } from '../../src/commands/monitor/types.ts';
import { decideSchedule, evolveSchedule } from '../../src/commands/schedule/decide.ts';
import type { ScheduleInput } from '../../src/commands/schedule/types.ts';
import { decideSync, type SyncInput } from '../../src/commands/sync/decide.ts';
import { decideTask, evolveTask } from '../../src/commands/task/decide.ts';
import type { TaskInput } from '../../src/commands/task/types.ts';
import { ApiError } from '../../src/lib/errors.ts';
import { batchWith, OK_URL, placed, RULES, VALID, type PathName } from '../support/payload-rules.ts';
import { meta } from './spec.ts';

const ORG = 'org_rules';
type Fields = Record<string, unknown>;
type MonitorInput = Partial<MonitorSpec> & { name: string; schedule_type: 'interval' | 'cron' };

const task = fold(evolveTask, null, decideTask({ type: 'CreateTask', orgId: ORG, plan: 'pro', input: VALID.task as TaskInput & { url: string } }, null, meta()));
const schedule = fold(evolveSchedule, null, decideSchedule({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: VALID.schedule as ScheduleInput & { url: string; cron: string } }, null, meta()));
const endpoint = fold(evolveEndpoint, null, decideEndpoint({ type: 'CreateEndpoint', orgId: ORG, plan: 'pro', input: VALID.endpoint as EndpointInput & { name: string }, secrets: null }, null, meta()));
const monitor = fold(evolveMonitor, null, decideMonitor({ type: 'CreateMonitor', orgId: ORG, input: VALID.monitor as MonitorInput }, null, meta()));

/** The decision each path asks for, with the rule's fields in their place. */
const decisions: Record<PathName, (fields: Fields) => unknown> = {
  'POST /tasks': (f) => decideTask({ type: 'CreateTask', orgId: ORG, plan: 'pro', input: { ...VALID.task, ...f } as TaskInput & { url: string } }, null, meta()),
  'POST /tasks (debounced)': (f) => decideDebounce({ type: 'DebounceTask', orgId: ORG, plan: 'pro', input: { ...VALID.debounced, ...f } as DebouncedInput }, null, meta()),
  'PUT /tasks/:id': (f) => decideTask({ type: 'UpdateTask', plan: 'pro', input: f as TaskInput }, task, meta()),
  'POST /tasks/batch (a task)': (f) => decideBatch({ type: 'AcceptBatch', orgId: ORG, plan: 'pro', batchId: 'cmd_1', input: { ...VALID.batch, tasks: [{ url: OK_URL, ...f }] } as unknown as BatchInput }, null, meta()),
  'POST /tasks/batch (shared)': (f) => decideBatch({ type: 'AcceptBatch', orgId: ORG, plan: 'pro', batchId: 'cmd_1', input: batchWith(f) as unknown as BatchInput }, null, meta()),
  'POST /schedules': (f) => decideSchedule({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: { ...VALID.schedule, ...f } as ScheduleInput & { url: string; cron: string } }, null, meta()),
  'PUT /schedules/:id': (f) => decideSchedule({ type: 'UpdateSchedule', plan: 'pro', input: f as ScheduleInput }, schedule, meta()),
  'PUT /sync (a schedule)': (f) => decideSync({ schedules: [{ ...VALID.syncedSchedule, ...f }] } as SyncInput, { schedules: [], monitors: [] }),
  'POST /monitors': (f) => decideMonitor({ type: 'CreateMonitor', orgId: ORG, input: { ...VALID.monitor, ...f } as MonitorInput }, null, meta()),
  'PUT /monitors/:id': (f) => decideMonitor({ type: 'UpdateMonitor', input: f as Partial<MonitorSpec> }, monitor, meta()),
  'PUT /sync (a monitor)': (f) => decideSync({ monitors: [{ ...VALID.syncedMonitor, ...f }] } as SyncInput, { schedules: [], monitors: [] }),
  'POST /endpoints': (f) => decideEndpoint({ type: 'CreateEndpoint', orgId: ORG, plan: 'pro', input: { ...VALID.endpoint, ...f } as EndpointInput & { name: string }, secrets: null }, null, meta()),
  'PUT /endpoints/:id': (f) => decideEndpoint({ type: 'UpdateEndpoint', plan: 'pro', input: f as EndpointInput, secrets: null }, endpoint, meta()),
};

/** The message without the item's place, which only some layers put in it. */
const bare = (message: string) => message.replace(/^(tasks|schedules|monitors)\[0\]\./, '');

describe('payload rules live in the deciders', () => {
  test('the valid resource of each path is decided (the rows below break one rule each)', () => {
    for (const [path, decide] of Object.entries(decisions)) assert.doesNotThrow(() => decide({}), path);
  });

  for (const rule of RULES) {
    test(`${rule.name}: 422 naming the field on ${rule.on.length} paths, with one message`, () => {
      const messages = new Set<string>();
      for (const path of rule.on) {
        const { fields, field } = placed(path, rule);
        assert.throws(() => decisions[path](fields), (err: unknown) => {
          assert.ok(err instanceof ApiError, `${path}: expected an ApiError, got ${String(err)}`);
          assert.equal(err.status, 422, `${path}: ${err.message}`);
          assert.equal(err.field, field, `${path}: ${err.message}`);
          messages.add(bare(err.message).replace(/grace_seconds/g, 'grace_period_seconds'));
          return true;
        }, path);
      }
      assert.equal(messages.size, 1, `one message on every path: ${[...messages].join(' | ')}`);
    });
  }

  test('PUT /sync: the issue\'s schedule (Transfer-Encoding, a CR LF value) is refused before anything is decided', () => {
    const input: SyncInput = { schedules: [
      { key: 'fine', url: OK_URL, cron: '@daily' },
      { key: 'bad', url: OK_URL, cron: '@daily', headers: { 'Transfer-Encoding': 'chunked', 'X-Bad': 'a\r\nb' } },
    ] };
    assert.throws(() => decideSync(input, { schedules: [], monitors: [] }), { status: 422, field: 'schedules[1].headers.Transfer-Encoding' });
    assert.throws(
      () => decideSync({ schedules: [{ ...input.schedules![1]!, headers: { 'X-Bad': 'a\r\nb' } }] }, { schedules: [], monitors: [] }),
      { status: 422, field: 'schedules[0].headers.X-Bad' },
    );
  });

  test('limits are inclusive: 100 headers, 8192-character values, exactly 256 KB, timeout 1000..300000, retries 0..10', () => {
    const edge = { headers: { ...Object.fromEntries(Array.from({ length: 99 }, (_, i) => [`X-H${i}`, 'v'])), 'X-Long': 'v'.repeat(8192) }, body: 'a'.repeat(262_144) };
    for (const path of ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (a task)', 'POST /schedules', 'PUT /schedules/:id', 'PUT /sync (a schedule)'] as const) {
      assert.doesNotThrow(() => decisions[path](edge), path);
    }
    for (const path of ['POST /tasks', 'POST /tasks/batch (shared)', 'POST /schedules'] as const) {
      assert.doesNotThrow(() => decisions[path]({ timeout_ms: 1000, retry_attempts: 0 }), path);
      assert.doesNotThrow(() => decisions[path]({ timeout_ms: 300_000, retry_attempts: 10 }), path);
    }
  });

  test('a trigger\'s callback_url is held to the same rule', () => {
    assert.throws(() => decideTask({ type: 'TriggerTask', callbackUrl: 'ftp://x.example/' }, task, meta()), { status: 422, field: 'callback_url' });
    assert.throws(() => decideSchedule({ type: 'TriggerSchedule', callbackUrl: 'http://x.example:0/' }, schedule, meta()), { status: 422, field: 'callback_url' });
  });

  test('a batch: 1 to 1000 tasks, at most 50 hosts counting the callback_url', () => {
    const batch = (tasks: number, hosts: number, callback?: string) => decisions['POST /tasks/batch (shared)']({
      tasks: Array.from({ length: tasks }, (_, i) => ({ url: `http://h${i % hosts}.example/` })),
      ...(callback ? { callback_url: callback } : {}),
    });
    assert.doesNotThrow(() => batch(1000, 50));
    assert.throws(() => batch(1001, 1), { status: 422, field: 'tasks' });
    assert.throws(() => batch(0, 1), { status: 422, field: 'tasks' });
    assert.throws(() => batch(51, 51), { status: 422, field: 'tasks' });
    assert.throws(() => batch(50, 50, 'http://cb.example/'), { status: 422, field: 'tasks' });
    assert.doesNotThrow(() => batch(50, 50, 'http://h0.example/cb'));
  });
});
