import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Organization } from '../src/commands/organization/types.ts';
import { parseSmtpUrl } from '../src/notifier/mailer.ts';
import { emailMessage, summaryLine, webhookPayload, type ExecutionSummary, type NotifySource } from '../src/notifier/message.ts';
import { notificationIdFor, notifies, planNotifications, type NotificationJob } from '../src/notifier/plan.ts';
import { createNotifyDecider } from '../src/notifier/reader.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import type { Channel } from '../src/commands/channel/types.ts';
import { nextState, type NotifyStateStore, type Outcome, type SourceState } from '../src/notifier/state.ts';
import { journaledNotifyState, type JournalEntry, type JournaledStateOptions, type StateJournal } from '../src/notifier/state-journal.ts';

/** A journal in memory: batches as stored, positions counted. */
function memoryJournal() {
  const batches: Array<{ position: number; entries: JournalEntry[] }> = [];
  let position = 0;
  const calls = { append: 0, truncate: 0 };
  let failing = false;
  const journal: StateJournal = {
    async append(entries) {
      if (failing) throw new Error('journal unavailable');
      calls.append++;
      batches.push({ position: ++position, entries: structuredClone(entries) });
      return position;
    },
    async load() {
      return { batches: batches.map((b) => structuredClone(b.entries)), last: position };
    },
    async truncate(through) {
      calls.truncate++;
      while (batches.length && batches[0]!.position <= through) batches.shift();
    },
  };
  return { journal, batches, calls, fail: (on: boolean) => void (failing = on) };
}

/** A per-key store stand-in that counts calls: memory's promise is fewer reads and writes, never other answers. */
function kvLike() {
  const data = new Map<string, SourceState>();
  const calls = { get: 0, put: 0, forget: 0 };
  const store: NotifyStateStore = {
    async get(o, s) { calls.get++; return data.get(`${o}.${s}`) ?? null; },
    async put(o, s, st) { calls.put++; data.set(`${o}.${s}`, st); },
    async forget(o, s) { calls.forget++; data.delete(`${o}.${s}`); },
  };
  return { data, calls, store };
}

/** A term's state over `store`, with a journal of its own unless given. */
function termState(store: NotifyStateStore, opts: Partial<JournaledStateOptions> & { journal?: StateJournal } = {}) {
  const { journal = memoryJournal().journal, ...rest } = opts;
  return journaledNotifyState(store, journal, {
    cacheSize: 50_000, pendingMax: 50_000, journalMax: 200_000, batchMax: 2_000, log: () => {}, signal: new AbortController().signal, ...rest,
  });
}

const task: NotifySource = {
  type: 'task',
  id: 'tsk_1',
  org_id: 'org_1',
  name: 'nightly-report',
  url: 'https://example.com/hook',
  notify_on_failure: null,
  notify_on_recovery: null,
  on_failure_url: null,
  on_recovery_url: null,
};
const org: Organization = {
  id: 'org_1',
  name: 'acme',
  plan: 'free',
  webhook_secret: 'whsec_x',
  notification_email: 'ops@example.com',
  notification_webhook_url: 'https://chat.example.com/hook',
  notify_on_failure: true,
  notify_on_recovery: true,
  created_at: '2024-01-01T00:00:00.000Z',
  updated_at: '2024-01-01T00:00:00.000Z',
};
const failedExe: ExecutionSummary = {
  id: 'exe_abc',
  status: 'failed',
  status_code: 500,
  error_message: 'HTTP 500',
  attempt: 1,
  scheduled_for: '2024-01-01T00:00:00.000Z',
  finished_at: '2024-01-01T00:00:01.000Z',
};

function run(outcomes: Outcome[]): Array<string | null> {
  let state: SourceState | null = null;
  return outcomes.map((o, i) => {
    const step = nextState(state, o, { seq: i + 1, time: 't', executionId: `exe_${i}` });
    if (step) state = step.state;
    return step?.transition ?? null;
  });
}

describe('failure/recovery state machine', () => {
  test('the first failure of a sequence notifies, the rest do not', () => {
    assert.deepEqual(run(['failure', 'failure', 'failure', 'failure', 'failure']), ['failed', null, null, null, null]);
  });
  test('a success after a failure recovers; success after success is nothing', () => {
    assert.deepEqual(run(['success', 'success', 'failure', 'success', 'success', 'failure', 'failure', 'success']), [
      null, null, 'failed', 'recovered', null, 'failed', null, 'recovered',
    ]);
  });
  test('an event at or before the stored sequence (a replay) changes nothing', () => {
    const failing: SourceState = { failing: true, seq: 10, since: 't', execution_id: 'exe_a' };
    assert.equal(nextState(failing, 'success', { seq: 10, time: 't', executionId: 'exe_b' }), null);
    assert.equal(nextState(failing, 'success', { seq: 9, time: 't', executionId: 'exe_b' }), null);
    assert.equal(nextState(failing, 'success', { seq: 11, time: 't', executionId: 'exe_b' })?.transition, 'recovered');
  });
});

describe('the notifier state cache', () => {
  const failing: SourceState = { failing: true, seq: 7, since: '2026-01-01T00:00:00.000Z', execution_id: 'exe_1' };

  test('a source read once is answered from memory after; a transition goes to the journal, not the per-key store', async () => {
    const { calls, store } = kvLike();
    const j = memoryJournal();
    const c = termState(store, { journal: j.journal });
    assert.equal(await c.get('org_1', 'tsk_1'), null);
    assert.equal(await c.get('org_1', 'tsk_1'), null);
    assert.equal(calls.get, 1);
    await c.put('org_1', 'tsk_1', failing);
    assert.deepEqual(await c.get('org_1', 'tsk_1'), failing);
    assert.equal(calls.get, 1);
    assert.deepEqual([calls.put, j.calls.append], [0, 1]);
    await c.forget('org_1', 'tsk_1');
    assert.equal(await c.get('org_1', 'tsk_1'), null);
    assert.deepEqual([calls.get, calls.forget, j.calls.append], [1, 0, 2]);
  });

  test('a created source costs no read; created never hides a state already known', async () => {
    const { calls, store, data } = kvLike();
    const c = termState(store);
    c.created('org_1', 'tsk_new');
    assert.equal(await c.get('org_1', 'tsk_new'), null);
    assert.equal(calls.get, 0);
    data.set('org_1.tsk_old', failing);
    assert.deepEqual(await c.get('org_1', 'tsk_old'), failing);
    c.created('org_1', 'tsk_old');
    assert.deepEqual(await c.get('org_1', 'tsk_old'), failing);
  });

  test('settled at once: a source born, a result that is no transition; a transition or an unknown state goes to the chain', async () => {
    const { calls, store, data } = kvLike();
    const c = termState(store);
    const published: NotificationJob[] = [];
    const decider = createNotifyDecider({
      directory: { organization: async () => org, known: () => org } as never, clock: { now: () => Date.parse('2026-01-01T00:00:00Z') } as never,
      resolvers: { task: async () => task }, emailEnabled: false, log: () => {},
    }, c, async (job) => void published.push(job));
    const at = '2026-01-01T00:00:00.000Z';
    const item = (seq: number, event: unknown) => ({ seq, subject: 'evt.x', event: event as JetcronEvent });
    const created = item(1, { type: 'TaskCreated', id: 'e1', at, org_id: 'org_1', data: { task: { id: 'tsk_1' }, execution: { id: 'exe_1' } } });
    const finished = (seq: number, status: 'success' | 'failed', next: string | null = null) =>
      item(seq, { type: 'AttemptFinished', id: `e${seq}`, at, org_id: 'org_1', data: { execution_id: `exe_${seq}`, source: { type: 'task', id: 'tsk_1', name: 'n' }, status, status_code: 200, error_message: null, attempt: 1, scheduled_for: at, finished_at: at, next_attempt_at: next, final: next === null } });
    await c.ready;
    assert.equal(decider.settle(created), true);
    assert.equal(decider.settle(finished(2, 'success')), true, 'a success of a source known not failing');
    assert.equal(decider.settle(finished(3, 'failed', at)), true, 'a retry follows: not the end');
    assert.equal(decider.settle(finished(4, 'failed')), false, 'a failure of a healthy source is a transition');
    await decider.handle(finished(4, 'failed'));
    assert.equal(published.length > 0, true);
    assert.equal(decider.settle(finished(5, 'failed')), true, 'failing already');
    assert.equal(decider.settle(finished(6, 'success')), false, 'a recovery');
    data.set('org_1.tsk_2', failing);
    const other = item(7, { type: 'AttemptFinished', id: 'e7', at, org_id: 'org_1', data: { execution_id: 'exe_7', source: { type: 'task', id: 'tsk_2', name: 'n' }, status: 'success', next_attempt_at: null, final: true } });
    assert.equal(decider.settle(other), false, 'not cached: read first, on the chain');
    assert.equal(calls.get, 0, 'settle never reads');
    assert.equal(decider.settle(item(8, { type: 'TaskUpdated', id: 'e8', at, org_id: 'org_1', data: { task: { id: 'tsk_1' } } })), true, 'a change: nothing to read or write');
    assert.equal(decider.settle(item(9, { type: 'TaskTriggered', id: 'e9', at, org_id: 'org_1', data: {} })), false, 'anything else: the chain decides');
  });

  test('a recovery nobody hears of is settled at once, its state on its way to the journal; one somebody hears goes to the chain', async () => {
    const { store } = kvLike();
    const at = '2026-01-01T00:00:00.000Z';
    const item = (seq: number, event: unknown) => ({ seq, subject: 'evt.x', event: event as JetcronEvent });
    const finished = (seq: number, task: string, status: 'success' | 'failed') =>
      item(seq, { type: 'AttemptFinished', id: `e${seq}`, at, org_id: 'org_1', data: { execution_id: `exe_${seq}`, source: { type: 'task', id: task, name: 'n' }, status, status_code: 200, error_message: null, attempt: 1, scheduled_for: at, finished_at: at, next_attempt_at: null, final: true } });
    const created = (seq: number, task: string) => item(seq, { type: 'TaskCreated', id: `e${seq}`, at, org_id: 'org_1', data: { task: { id: task }, execution: { id: `exe_${seq}` } } });
    const deciderFor = (o: Organization, knownChannels: (orgId: string) => Channel[] | undefined) => {
      const states = termState(store);
      const published: NotificationJob[] = [];
      const decider = createNotifyDecider({
        directory: { organization: async () => o, known: () => o } as never, clock: { now: () => Date.parse(at) } as never,
        resolvers: { task: async () => task }, emailEnabled: false, log: () => {}, channels: async () => knownChannels('org_1') ?? [], knownChannels,
      }, states, async (job) => void published.push(job));
      return { states, published, decider };
    };
    // The organization does not want recoveries: no URL of the task's, nothing to send.
    const quiet = deciderFor({ ...org, notify_on_recovery: false }, () => []);
    await quiet.states.ready;
    assert.equal(quiet.decider.settle(created(1, 'tsk_1')), true);
    await quiet.decider.handle(finished(2, 'tsk_1', 'failed'));
    const failures = quiet.published.length;
    const settled = quiet.decider.settle(finished(3, 'tsk_1', 'success'));
    assert.ok(settled instanceof Promise, 'settled, with a write on its way');
    await settled;
    assert.equal(quiet.states.peek('org_1', 'tsk_1')?.failing, false);
    assert.equal(quiet.published.length, failures, 'nothing announced');
    // It wants them and has a webhook: the chain announces it.
    const heard = deciderFor(org, () => []);
    await heard.states.ready;
    heard.decider.settle(created(1, 'tsk_1'));
    await heard.decider.handle(finished(2, 'tsk_1', 'failed'));
    assert.equal(heard.decider.settle(finished(3, 'tsk_1', 'success')), false);
    // It wants them, no webhook or email, and its channels are not read yet: the chain reads them.
    const unread = deciderFor({ ...org, notification_webhook_url: null, notification_email: null }, () => undefined);
    await unread.states.ready;
    unread.decider.settle(created(1, 'tsk_1'));
    await unread.decider.handle(finished(2, 'tsk_1', 'failed'));
    assert.equal(unread.decider.settle(finished(3, 'tsk_1', 'success')), false);
  });

  test('a monitor going down and recovering is told as its events carry it: no read of the monitor', async () => {
    const { store } = kvLike();
    const published: NotificationJob[] = [];
    const decider = createNotifyDecider({
      directory: { organization: async () => org, known: () => org } as never, clock: { now: () => Date.parse('2026-01-01T00:00:00Z') } as never,
      resolvers: { monitor: async () => assert.fail('the monitor is read') }, emailEnabled: false, log: () => {},
    }, termState(store), async (job) => void published.push(job));
    const at = '2026-01-01T00:00:00.000Z';
    const monitor = { id: 'mon_1', org_id: 'org_1', name: 'db-backup', status: 'down', notify_on_failure: null, notify_on_recovery: true, on_failure_url: 'https://example.com/down', on_recovery_url: null };
    const item = (seq: number, event: unknown) => ({ seq, subject: 'evt.monitor-partition.0', event: event as JetcronEvent });
    await decider.handle(item(1, { type: 'MonitorWentDown', id: 'mon_1.down.x', at, org_id: 'org_1', data: { monitor, reason: 'missed' } }));
    await decider.handle(item(2, { type: 'MonitorPinged', id: 'evt_up', at, org_id: 'org_1', data: { monitor: { ...monitor, status: 'up' }, ping: {}, previous_status: 'down' } }));
    const sent = published.map((j) => [j.event, j.target, j.source.name]);
    assert.ok(sent.some(([event, target]) => event === 'monitor.down' && target === 'https://example.com/down'), JSON.stringify(sent));
    assert.ok(sent.some(([event, target]) => event === 'monitor.recovered' && target === org.notification_webhook_url), JSON.stringify(sent));
    assert.ok(sent.every(([, , name]) => name === 'db-backup'));
  });

  test("a task's recovery takes the task as its failure read it: no second read, unless the task changed since", async () => {
    const { store } = kvLike();
    const published: NotificationJob[] = [];
    let reads = 0;
    let current: NotifySource = { ...task, on_recovery_url: 'https://example.com/first' };
    const decider = createNotifyDecider({
      directory: { organization: async () => org, known: () => org } as never, clock: { now: () => Date.parse('2026-01-01T00:00:00Z') } as never,
      resolvers: { task: async () => (reads++, current) }, emailEnabled: false, log: () => {},
    }, termState(store), async (job) => void published.push(job));
    const at = '2026-01-01T00:00:00.000Z';
    const item = (seq: number, event: unknown) => ({ seq, subject: 'evt.x', event: event as JetcronEvent });
    const finished = (seq: number, status: 'success' | 'failed') =>
      item(seq, { type: 'AttemptFinished', id: `e${seq}`, at, org_id: 'org_1', data: { execution_id: `exe_${seq}`, source: { type: 'task', id: 'tsk_1', name: 'n' }, status, status_code: 200, error_message: null, attempt: 1, scheduled_for: at, finished_at: at, next_attempt_at: null, final: true } });
    const recoveredAt = () => published.filter((j) => j.channel === 'source_webhook').map((j) => j.target);
    await decider.handle(finished(1, 'failed'));
    await decider.handle(finished(2, 'success'));
    assert.equal(reads, 1, 'the recovery read nothing');
    assert.deepEqual(recoveredAt(), ['https://example.com/first']);
    // Failing again, then changed: the recovery reads the task as it is now.
    await decider.handle(finished(3, 'failed'));
    current = { ...task, on_recovery_url: 'https://example.com/second' };
    await decider.handle(item(4, { type: 'TaskUpdated', id: 'e4', at, org_id: 'org_1', data: { task: { id: 'tsk_1' }, changed: ['on_recovery_url'] } }));
    await decider.handle(finished(5, 'success'));
    assert.equal(reads, 3);
    assert.deepEqual(recoveredAt(), ['https://example.com/first', 'https://example.com/second']);
    // Failing again, then deleted: nothing read is used, and the read says it is gone.
    await decider.handle(finished(6, 'failed'));
    await decider.handle(item(7, { type: 'TaskDeleted', id: 'e7', at, org_id: 'org_1', data: { task: { id: 'tsk_1' } } }));
    const before = published.length;
    current = null as unknown as NotifySource;
    await decider.handle(finished(8, 'success'));
    assert.equal(published.length, before, 'a deleted task tells nothing');
  });

  test('bounded: the last `size` sources are kept, older ones dropped and read again from the store', async () => {
    const { calls, store, data } = kvLike();
    const c = termState(store, { cacheSize: 2 });
    data.set('org_1.a', failing);
    for (const id of ['a', 'b', 'c', 'd']) await c.get('org_1', id);
    assert.equal(calls.get, 4);
    // a and b are still among the last four read (two generations of two).
    await c.get('org_1', 'a');
    assert.equal(calls.get, 4);
    await c.get('org_1', 'e');
    assert.equal(calls.get, 5);
    // Past two more generations, a is gone: read again.
    await c.get('org_1', 'f');
    await c.get('org_1', 'g');
    assert.deepEqual(await c.get('org_1', 'a'), failing);
    assert.equal(calls.get, 8);
    await c.get('org_1', 'g');
    assert.equal(calls.get, 8);
  });
});

describe('the notifier state journal', () => {
  const at = '2026-01-01T00:00:00.000Z';
  const state = (failing: boolean, seq: number): SourceState => ({ failing, seq, since: at, execution_id: `exe_${seq}` });

  test("one loop turn's transitions share one batch; a put resolves once it is stored, and only then is it known", async () => {
    const { store } = kvLike();
    const j = memoryJournal();
    const c = termState(store, { journal: j.journal });
    await c.ready;
    for (let i = 0; i < 100; i++) c.created('org_1', `tsk_${i}`);
    const puts = Array.from({ length: 100 }, (_, i) => c.put('org_1', `tsk_${i}`, state(true, i + 1)));
    assert.equal(c.peek('org_1', 'tsk_0'), null, 'not stored yet: still the state before');
    await Promise.all(puts);
    assert.equal(j.calls.append, 1);
    assert.equal(j.batches[0]!.entries.length, 100);
    assert.deepEqual(c.peek('org_1', 'tsk_0'), state(true, 1));
  });

  test('a batch that cannot be stored fails its puts and changes nothing known', async () => {
    const { store } = kvLike();
    const j = memoryJournal();
    const c = termState(store, { journal: j.journal });
    c.created('org_1', 'tsk_1');
    await c.put('org_1', 'tsk_1', state(true, 1));
    j.fail(true);
    await assert.rejects(c.put('org_1', 'tsk_1', state(false, 2)), /journal unavailable/);
    assert.deepEqual(c.peek('org_1', 'tsk_1'), state(true, 1), 'the recovery is decided again when the event is retried');
    j.fail(false);
    await c.put('org_1', 'tsk_1', state(false, 2));
    assert.deepEqual(c.peek('org_1', 'tsk_1'), state(false, 2));
  });

  test('the next term knows what the journal holds, without reading the per-key store', async () => {
    const { calls, store } = kvLike();
    const j = memoryJournal();
    const first = termState(store, { journal: j.journal });
    first.created('org_1', 'tsk_a');
    first.created('org_1', 'tsk_b');
    await first.put('org_1', 'tsk_a', state(true, 1));
    await first.put('org_1', 'tsk_b', state(true, 2));
    await first.put('org_1', 'tsk_b', state(false, 3));
    await first.forget('org_1', 'tsk_a');
    await first.put('org_1', 'tsk_c', state(true, 4)); // never seen created: the store may hold it
    const next = termState(store, { journal: j.journal });
    assert.equal(next.peek('org_1', 'tsk_b'), undefined, 'nothing known before the journal is read');
    await next.ready;
    assert.equal(await next.get('org_1', 'tsk_a'), null);
    assert.deepEqual(await next.get('org_1', 'tsk_b'), state(false, 3));
    assert.deepEqual(await next.get('org_1', 'tsk_c'), state(true, 4));
    assert.equal(calls.get, 0, 'the next term read nothing from the per-key store');
    // A frozen holder's late batch with an older transition does not undo a newer one.
    await j.journal.append([{ k: 'org_1.tsk_b', s: state(true, 2), b: false }]);
    const third = termState(store, { journal: j.journal });
    assert.deepEqual(await third.get('org_1', 'tsk_b'), state(false, 3));
  });

  test('a journal that cannot be read yet is read again: nothing is decided before it is', async () => {
    const { store } = kvLike();
    const j = memoryJournal();
    await j.journal.append([{ k: 'org_1.tsk_1', s: state(true, 5), b: false }]);
    let failures = 1;
    const flaky: StateJournal = { ...j.journal, load: async (signal) => (failures-- > 0 ? Promise.reject(new Error('no route')) : j.journal.load(signal)) };
    const c = termState(store, { journal: flaky });
    assert.deepEqual(await c.get('org_1', 'tsk_1'), state(true, 5));
  });

  test('a compaction writes what the per-key store must hold, then truncates the journal; a source that failed and recovered in view costs no write', async () => {
    const { calls, data, store } = kvLike();
    const j = memoryJournal();
    data.set('org_1.tsk_old', state(true, 1));
    const c = termState(store, { journal: j.journal });
    assert.deepEqual(await c.get('org_1', 'tsk_old'), state(true, 1));
    await c.put('org_1', 'tsk_old', state(false, 10)); // the store holds it failing: must be written
    for (const id of ['tsk_1', 'tsk_2']) {
      c.created('org_1', id);
      await c.put('org_1', id, state(true, 11)); // failing: must be written
    }
    c.created('org_1', 'tsk_3');
    await c.put('org_1', 'tsk_3', state(true, 12));
    await c.put('org_1', 'tsk_3', state(false, 13)); // failed and recovered in view: nothing to write
    assert.equal(c.pending, 3);
    assert.deepEqual([calls.put, c.compaction()], [0, undefined], 'below its limits: no compaction');
    await c.compactNow();
    assert.equal(c.compaction(), undefined);
    assert.deepEqual([calls.put, calls.forget], [3, 0]);
    assert.deepEqual(data.get('org_1.tsk_old'), state(false, 10));
    assert.deepEqual(data.get('org_1.tsk_1'), state(true, 11));
    assert.equal(data.has('org_1.tsk_3'), false);
    assert.equal(c.pending, 0);
    assert.equal(j.batches.length, 0, 'every batch stored before the compaction is dropped');
    // The next term reads the written ones from the per-key store.
    const next = termState(store, { journal: j.journal });
    assert.deepEqual(await next.get('org_1', 'tsk_1'), state(true, 11));
    assert.equal(await next.get('org_1', 'tsk_3'), null);
  });

  test('a compaction starts by itself past its limit of entries waiting', async () => {
    const { calls, store } = kvLike();
    const c = termState(store, { pendingMax: 2 });
    for (const id of ['tsk_1', 'tsk_2']) {
      c.created('org_1', id);
      await c.put('org_1', id, state(true, 1));
    }
    assert.notEqual(c.compaction(), undefined);
    await c.compaction();
    assert.deepEqual([calls.put, c.pending], [2, 0]);
  });

  test('a term that ended starts no compaction', async () => {
    const { calls, store } = kvLike();
    const j = memoryJournal();
    const ended = new AbortController();
    const c = termState(store, { journal: j.journal, pendingMax: 1, signal: ended.signal });
    ended.abort();
    c.created('org_1', 'tsk_1');
    await c.put('org_1', 'tsk_1', state(true, 1));
    assert.equal(c.compaction(), undefined);
    assert.equal(calls.put, 0);
    assert.equal(j.batches.length, 1);
  });
});

describe('planning deliveries', () => {
  // Every case also holds `notifies` (the reader's check before planning) to what the plan makes.
  const plan = (source: NotifySource, o: Organization, transition: 'failed' | 'recovered', emailEnabled = true) => {
    const channels = planNotifications({ id: 'ntf_abc', transition, source, org: o, execution: failedExe, emailEnabled, now: 0 }).map((j) => j.channel).sort();
    assert.equal(notifies(source, o, transition, emailEnabled), channels.length > 0);
    return channels;
  };

  test('null flags follow the organization; true always; false never', () => {
    assert.deepEqual(plan(task, org, 'failed'), ['email', 'org_webhook']);
    const quiet = { ...org, notify_on_failure: false };
    assert.deepEqual(plan(task, quiet, 'failed'), []);
    assert.deepEqual(plan({ ...task, notify_on_failure: true }, quiet, 'failed'), ['email', 'org_webhook']);
    assert.deepEqual(plan({ ...task, notify_on_failure: false }, org, 'failed'), []);
    assert.deepEqual(plan({ ...task, notify_on_failure: false }, org, 'recovered'), ['email', 'org_webhook']);
    assert.deepEqual(plan({ ...task, notify_on_recovery: false }, org, 'recovered'), []);
  });
  test('email only with SMTP and an address; webhook only with a URL', () => {
    assert.deepEqual(plan(task, org, 'failed', false), ['org_webhook']);
    assert.deepEqual(plan(task, { ...org, notification_email: null, notification_webhook_url: null }, 'failed'), []);
  });
  test("the resource's own URLs fire on their transition whatever the flags say", () => {
    const own = { ...task, notify_on_failure: false, notify_on_recovery: false, on_failure_url: 'https://a.example/f', on_recovery_url: 'https://a.example/r' };
    assert.equal(notifies(own, { ...org, notification_email: null, notification_webhook_url: null }, 'recovered', false), true);
    const failed = planNotifications({ id: 'ntf_abc', transition: 'failed', source: own, org, execution: failedExe, emailEnabled: true, now: 0 });
    assert.deepEqual(failed.map((j) => [j.channel, j.target]), [['source_webhook', 'https://a.example/f']]);
    const recovered = planNotifications({ id: 'ntf_abc', transition: 'recovered', source: own, org, execution: failedExe, emailEnabled: true, now: 0 });
    assert.deepEqual(recovered.map((j) => [j.channel, j.target]), [['source_webhook', 'https://a.example/r']]);
    const body = JSON.parse(failed[0]!.body!);
    assert.equal(body.text, undefined);
    assert.equal(body.content, undefined);
    assert.equal(failed[0]!.signing_id, 'exe_abc');
  });
  test('notification ids derive from the execution id', () => {
    assert.equal(notificationIdFor('exe_0123456789abcdefghjkmnpq'), 'ntf_0123456789abcdefghjkmnpq');
    assert.match(notificationIdFor('sch_x@2024-01-01T00:00:00Z'), /^ntf_[0-9a-f]{32}$/);
    assert.equal(notificationIdFor('a.b'), notificationIdFor('a.b'));
  });
});

describe('messages', () => {
  test('the organization webhook payload', () => {
    const p = webhookPayload(task, 'failed', failedExe, true);
    assert.deepEqual(p, {
      event: 'task.failed',
      task: { id: 'tsk_1', name: 'nightly-report', url: 'https://example.com/hook' },
      execution: failedExe,
      text: 'jetcron: Task "nightly-report" failed: HTTP 500 after 1 attempt (https://example.com/hook)',
      content: 'jetcron: Task "nightly-report" failed: HTTP 500 after 1 attempt (https://example.com/hook)',
    });
  });
  test('summaries for timeouts, connection errors and recoveries', () => {
    assert.match(summaryLine(task, 'failed', { ...failedExe, status: 'timeout', status_code: null, error_message: 'timed out after 30000 ms', attempt: 3 }),
      /Task "nightly-report" timed out: timed out after 30000 ms after 3 attempts/);
    assert.match(summaryLine(task, 'failed', { ...failedExe, status_code: null, error_message: 'connect ECONNREFUSED' }), /failed: connect ECONNREFUSED/);
    assert.match(summaryLine(task, 'recovered', { ...failedExe, status: 'success', status_code: 200, error_message: null }), /recovered: HTTP 200/);
    assert.equal(summaryLine({ ...task, type: 'monitor', url: null }, 'failed', null), 'jetcron: Monitor "nightly-report" is down');
    assert.equal(webhookPayload({ ...task, type: 'monitor', url: null }, 'failed', null, false).event, 'monitor.down');
  });
  test('a monitor down says why: in the payload, the summary line and the email', () => {
    const monitor = { ...task, type: 'monitor' as const, url: null };
    const cases = [
      [{ down_reason: 'missed' }, 'no ping in time'],
      [{ down_reason: 'failed' }, 'the job signalled a failure'],
      [{ down_reason: 'exit_status', exit_status: 3, duration_ms: 1200 }, 'the job exited with status 3'],
      [{ down_reason: 'too_long', run_started_at: '2026-03-01T03:00:00.000Z' }, 'a run started at 2026-03-01T03:00:00.000Z did not end in time'],
      [{ down_reason: 'too_fast', duration_ms: 40 }, 'a run ended too fast (40 ms)'],
    ] as const;
    for (const [down, words] of cases) {
      const source = { ...monitor, down: { ...down } };
      assert.equal(summaryLine(source, 'failed', null), `jetcron: Monitor "nightly-report" is down: ${words}`);
      assert.deepEqual((webhookPayload(source, 'failed', null, false) as Record<string, unknown>).monitor, { id: task.id, name: task.name, ...down });
      assert.match(emailMessage(source, 'failed', null).text, new RegExp(`Down reason: ${down.down_reason}`));
    }
  });
  test('email subject and body', () => {
    const m = emailMessage(task, 'failed', failedExe);
    assert.equal(m.subject, '[jetcron] Task "nightly-report" failed');
    assert.match(m.text, /Execution: exe_abc/);
    assert.match(m.text, /HTTP status: 500/);
    assert.equal(emailMessage(task, 'recovered', { ...failedExe, status: 'success', status_code: 200 }).subject, '[jetcron] Task "nightly-report" recovered');
  });
});

describe('SMTP_URL', () => {
  test('host, port, TLS, credentials and sender', () => {
    const s = parseSmtpUrl('smtps://me%40x.io:p%40ss@mail.example.com:465?from=alerts%40example.com&tls.rejectUnauthorized=false');
    assert.equal(s.options.host, 'mail.example.com');
    assert.equal(s.options.port, 465);
    assert.equal(s.options.secure, true);
    assert.deepEqual(s.options.auth, { user: 'me@x.io', pass: 'p@ss' });
    assert.deepEqual(s.options.tls, { rejectUnauthorized: false });
    assert.equal(s.from, 'alerts@example.com');
    assert.doesNotMatch(s.display, /p%40ss|p@ss/);
    const plain = parseSmtpUrl('smtp://127.0.0.1:2525');
    assert.equal(plain.options.secure, false);
    assert.equal(plain.options.auth, undefined);
    assert.match(plain.from, /^jetcron </);
  });
  test('refuses what is not an SMTP URL', () => {
    assert.throws(() => parseSmtpUrl('http://mail.example.com'), /smtp:\/\//);
    assert.throws(() => parseSmtpUrl('not a url'), /not a URL/);
  });
});
