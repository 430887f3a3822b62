// execute() against an event store held in memory: no NATS. The store applies the
// same guard JetStream does (the subject's last sequence) and numbers events as a stream.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { execute, retryConflicts, type CommandDeps, type Decide } from '../../src/commands/execute.ts';
import { decideSchedule } from '../../src/commands/schedule/decide.ts';
import { scheduleSubject, recordTick } from '../../src/commands/schedule/handlers.ts';
import type { ScheduleEvent } from '../../src/commands/schedule/types.ts';
import type { Envelope, StoredEvent } from '../../src/commands/envelope.ts';
import { ConcurrencyError, type EventStore } from '../../src/commands/store.ts';
import { createHeads } from '../../src/commands/heads.ts';
import { ApiError } from '../../src/lib/errors.ts';
import { createClock } from '../../src/lib/clock.ts';
import { meta } from './spec.ts';

function memoryStore(): EventStore & { log: StoredEvent[]; appends: Array<{ subject: string; expectedSeq: number | undefined }> } {
  const log: StoredEvent[] = [];
  const appends: Array<{ subject: string; expectedSeq: number | undefined }> = [];
  const lastOf = (subject: string) => [...log].reverse().find((e) => e.subject === subject) ?? null;
  return {
    log,
    appends,
    async append(subject, event, expectedSeq) {
      appends.push({ subject, expectedSeq });
      if (expectedSeq !== undefined && (lastOf(subject)?.seq ?? 0) !== expectedSeq) throw new ConcurrencyError(subject);
      log.push({ event, seq: log.length + 1, subject });
      return log.length;
    },
    async appendCommit(subject, events, expectedSeq) {
      appends.push({ subject, expectedSeq });
      if ((lastOf(subject)?.seq ?? 0) !== expectedSeq) throw new ConcurrencyError(subject);
      const seq = log.length + 1;
      // The events of one message share its sequence.
      for (const [index, event] of events.entries()) log.push({ event, seq, subject, index });
      return seq;
    },
    async lastMessage<E extends Envelope>(subject: string) {
      const last = lastOf(subject);
      return last ? { events: log.filter((e) => e.seq === last.seq).map((e) => e.event as E), seq: last.seq } : null;
    },
    async last<E extends Envelope>(subject: string) {
      return lastOf(subject) as StoredEvent<E> | null;
    },
    async at<E extends Envelope>(seq: number) {
      return (log[seq - 1] ?? null) as StoredEvent<E> | null;
    },
  };
}

// A counter aggregate: its events carry the count after them.
type Counted = Envelope<'Counted', { count: number }>;
type Command = { add: number };
const evolve = (_s: number | null, e: Counted) => e.data.count;
const counted = (id: string, count: number): Counted => ({ type: 'Counted', id, at: '2026-03-01T12:00:00.000Z', org_id: 'org_c', data: { count } });
/** One event per unit added, each with the running count. */
const decide: Decide<number, Command, Counted> = (c, state, m) =>
  Array.from({ length: c.add }, (_, i) => counted(`${m.eventId}.${i}`, (state ?? 0) + i + 1));

const depsOf = (store: EventStore): CommandDeps => ({ store, clock: createClock(1) });

describe('execute', () => {
  test('no event: nothing appended; the answer is the state loaded and its sequence', async () => {
    const store = memoryStore();
    await store.append('evt.c.1', counted('e0', 5), 0);
    const result = await execute(depsOf(store), 'evt.c.1', { add: 0 }, decide, evolve);
    assert.deepEqual(result, { events: [], state: 5, seq: 1 });
    assert.equal(store.log.length, 1);
    assert.deepEqual(await execute(depsOf(store), 'evt.c.none', { add: 0 }, decide, evolve), { events: [], state: null, seq: 0 });
  });

  test('several events: appended in order, each guarded by the one before; the answer is the last', async () => {
    const store = memoryStore();
    await store.append('evt.c.other', counted('o', 1), 0);
    await store.append('evt.c.1', counted('e0', 1), 0);
    const result = await execute(depsOf(store), 'evt.c.1', { add: 3 }, decide, evolve);
    assert.deepEqual(result.events.map((e) => e.data.count), [2, 3, 4]);
    assert.equal(result.state, 4);
    assert.equal(result.seq, 5);
    assert.deepEqual(store.appends.slice(2).map((a) => a.expectedSeq), [2, 3, 4]);
  });

  test('a conflict decides the whole command again, on the state that won', async () => {
    const store = memoryStore();
    let decisions = 0;
    const racing: Decide<number, Command, Counted> = (c, state, m) => {
      decisions++;
      // Another writer gets in between the load and the first append, once.
      if (decisions === 1) void store.append('evt.c.1', counted('theirs', 10), 0);
      return decide(c, state, m);
    };
    const result = await execute(depsOf(store), 'evt.c.1', { add: 2 }, racing, evolve);
    assert.equal(decisions, 2);
    assert.deepEqual(store.log.map((e) => (e.event as Counted).data.count), [10, 11, 12]);
    assert.equal(result.state, 12);
  });

  test('gather reads after each load, and its answer reaches the decider', async () => {
    const store = memoryStore();
    const seen: Array<number | null> = [];
    const result = await execute(depsOf(store), 'evt.c.1', { add: 0 }, (c, s, m) => decide(c, s, m), evolve, {
      gather: async (command, state) => {
        seen.push(state);
        return { add: command.add + 1 };
      },
    });
    assert.deepEqual(seen, [null]);
    assert.equal(result.state, 1);
  });

  test('two events with one id are refused before anything is appended', async () => {
    const store = memoryStore();
    const twice: Decide<number, Command, Counted> = () => [counted('same', 1), counted('same', 2)];
    await assert.rejects(execute(depsOf(store), 'evt.c.1', { add: 0 }, twice, evolve), /two events one id/);
    assert.equal(store.log.length, 0);
  });

  test('a caller can name the error of a spent budget (the scheduler: a transient conflict, not a 503)', async () => {
    const store = memoryStore();
    const err = await retryConflicts({ store }, 'k', async () => { throw new ConcurrencyError('k'); }, 20, () => new ConcurrencyError('evt.k')).catch((e: unknown) => e);
    assert.ok(err instanceof ConcurrencyError);
  });
});

describe('execute with remembered heads (this process\'s last appends)', () => {
  /** The memory store, counting its loads. */
  function countingStore() {
    const store = memoryStore();
    const loads: string[] = [];
    const last = store.last.bind(store);
    store.last = async <E extends Envelope>(subject: string) => {
      loads.push(subject);
      return last<E>(subject);
    };
    return Object.assign(store, { loads });
  }

  test('after an append, the next command on the subject decides without a load, guarded by the remembered sequence', async () => {
    const store = countingStore();
    const heads = createHeads<number>(10);
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    const second = await execute(depsOf(store), 'evt.c.1', { add: 2 }, decide, evolve, { heads });
    assert.deepEqual(store.loads, ['evt.c.1']);
    assert.deepEqual(second, { events: second.events, state: 3, seq: 3 });
    assert.deepEqual(store.appends.map((a) => a.expectedSeq), [0, 1, 2]);
  });

  test('another writer appended since: the guard refuses, the command is decided again from the log at once (no lost update)', async () => {
    const store = countingStore();
    const heads = createHeads<number>(10);
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    await store.append('evt.c.1', counted('theirs', 10), 1);
    const result = await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    assert.equal(result.state, 11);
    assert.deepEqual(store.log.map((e) => (e.event as Counted).data.count), [1, 10, 11]);
    // Then remembered again.
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    assert.deepEqual(store.loads, ['evt.c.1', 'evt.c.1']);
  });

  test('a refusal or a decision of nothing from a remembered head is decided again from the log, which may say otherwise', async () => {
    const store = countingStore();
    const heads = createHeads<number>(10);
    // Refuses below 10, as a paused monitor refuses a ping.
    const picky: Decide<number, Command, Counted> = (c, state, m) => {
      if ((state ?? 0) < 10) throw new ApiError(410, 'too small');
      return decide(c, state, m);
    };
    const idle: Decide<number, Command, Counted> = (c, state, m) => ((state ?? 0) >= 10 ? [] : decide(c, state, m));
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    await store.append('evt.c.1', counted('theirs', 10), 1);
    assert.equal((await execute(depsOf(store), 'evt.c.1', { add: 1 }, picky, evolve, { heads })).state, 11);
    await store.append('evt.c.1', counted('theirs-2', 20), 3);
    assert.deepEqual(await execute(depsOf(store), 'evt.c.1', { add: 1 }, idle, evolve, { heads }), { events: [], state: 20, seq: 4 });
  });

  test('a failed append that may have been stored is the answer, not decided again (it would be stored twice)', async () => {
    const store = countingStore();
    const heads = createHeads<number>(10);
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    const append = store.append.bind(store);
    store.append = async () => { throw new Error('no JetStream ack within 10000 ms'); };
    await assert.rejects(execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads }), /no JetStream ack/);
    store.append = append;
    // Forgotten: the next command loads.
    await execute(depsOf(store), 'evt.c.1', { add: 1 }, decide, evolve, { heads });
    assert.deepEqual(store.loads, ['evt.c.1', 'evt.c.1']);
  });

  test('heads are kept per store, and at most `max` subjects (the oldest forgotten)', async () => {
    const heads = createHeads<number>(2);
    const a = memoryStore();
    heads.set(a, 's1', 1, 1);
    heads.set(a, 's2', 2, 2);
    heads.set(a, 's3', 3, 3);
    assert.equal(heads.get(a, 's1'), undefined);
    assert.deepEqual(heads.get(a, 's3'), { state: 3, seq: 3 });
    assert.equal(heads.get(memoryStore(), 's3'), undefined);
    heads.set(a, 's3', null, 4);
    assert.equal(heads.get(a, 's3'), undefined);
  });
});

describe('schedule ticks through execute (two schedulers firing one tick)', () => {
  test('the tick is stored once; the second fire decides nothing', async () => {
    const store = memoryStore();
    const deps = depsOf(store);
    const [created] = decideSchedule({ type: 'CreateSchedule', orgId: 'org_t', plan: 'free', input: { url: 'https://example.com/', cron: '* * * * *' } }, null, meta());
    await store.append(scheduleSubject('org_t', 'sch_1'), created!, 0);
    const tickAt = created!.data.schedule.next_run_at!;
    await Promise.all([recordTick(deps, 'org_t', 'sch_1', tickAt), recordTick(deps, 'org_t', 'sch_1', tickAt)]);
    const types = store.log.map((e) => (e.event as ScheduleEvent).type);
    assert.deepEqual(types, ['ScheduleCreated', 'ScheduleTicked']);
  });
});
