/**
 * Commits: one EVENTS message holding several events. Every reader hands them on as
 * events, in order, with their message's sequence, beside the plain one-event messages
 * the log already holds; a keyed reader's checkpoint passes a commit only once all of
 * its events have finished.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../streams/definitions.ts';
import { commitMessage, eventsOf } from '../src/commands/commit.ts';
import type { Envelope, StoredEvent } from '../src/commands/envelope.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { encodeJson } from '../src/lib/json.ts';
import type { Nats } from '../src/nats/connection.ts';
import { readEvents } from '../src/nats/event-reader.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { readEventsKeyed } from '../src/nats/keyed-event-reader.ts';
import { failureKey, type FailureRecord } from '../src/nats/failure-ledger.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { createKeyedPipeline } from '../src/nats/keyed-pipeline.ts';
import { startNatsWithStreams } from './support/nats.ts';
import { eventually } from './support/service.ts';

const ev = (n: number): Envelope => ({ type: 'Probe', id: `probe-${n}`, at: new Date(0).toISOString(), org_id: 'org_x', data: { n } });

test('eventsOf: a commit is its list, a plain event a list of one, anything else an error', () => {
  assert.deepEqual(eventsOf(commitMessage('c1', [ev(1), ev(2)], new Date())).map((e) => e.id), ['probe-1', 'probe-2']);
  assert.deepEqual(eventsOf(ev(3)).map((e) => e.id), ['probe-3']);
  assert.throws(() => eventsOf({ events: [] }), /without a type/);
  assert.throws(() => eventsOf(null), /without a type/);
  assert.throws(() => commitMessage('c2', [], new Date()), /at least one event/);
});

test('keyed pipeline: a position shared by several items completes only once all of them did', async () => {
  const pipeline = createKeyedPipeline({ maxInFlight: 10, retryMs: 10, log: () => {} });
  const gates = new Map<string, () => void>();
  const gated = (name: string) => () => new Promise<void>((r) => gates.set(name, r));
  pipeline.hold(5);
  await pipeline.push('a', 5, gated('5a'), () => false);
  await pipeline.push('b', 5, gated('5b'), () => false);
  pipeline.release();
  pipeline.hold(6);
  await pipeline.push('c', 6, gated('6c'), () => false);
  pipeline.release();
  const settle = () => new Promise((r) => setImmediate(r));
  await settle();
  gates.get('5a')!();
  await settle();
  assert.equal(pipeline.completed, 4, 'one of the two items at 5 is still running');
  gates.get('6c')!();
  await settle();
  assert.equal(pipeline.completed, 4, 'a later position finished does not pass an unfinished earlier one');
  gates.get('5b')!();
  await pipeline.drain();
  assert.equal(pipeline.completed, 6);
});

test('keyed pipeline: a passed item finishes at once, in order: it neither waits for nor passes an earlier unfinished one', async () => {
  const pipeline = createKeyedPipeline({ maxInFlight: 10, retryMs: 10, log: () => {} });
  let open!: () => void;
  await pipeline.push('a', 3, () => new Promise<void>((r) => (open = r)), () => false);
  pipeline.pass(4);
  pipeline.pass(5);
  assert.equal(pipeline.completed, 0, 'item 3 still runs: 4 and 5 are done but not passed');
  open();
  await pipeline.drain();
  assert.equal(pipeline.completed, 5);
  pipeline.pass(6);
  assert.equal(pipeline.completed, 6, 'with nothing before it, a passed item completes at once');
});

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
before(async () => {
  server = await startNatsWithStreams();
  nats = await server.connect('commit-reading test');
  // seq 1: a plain event; seq 2: a commit of three; seq 3: a plain event.
  await nats.publish('evt.org_x.probe.a', encodeJson(ev(1)));
  await nats.publish('evt.org_x.lane.k', encodeJson(commitMessage('commit-1', [ev(2), ev(3), ev(4)], new Date())));
  await nats.publish('evt.org_x.probe.b', encodeJson(ev(5)));
});
after(async () => {
  await nats.close();
  await server.stop();
});

test('readEvents hands a commit on as its events, in order, with the message sequence and their place in it', async () => {
  const supervisor = await openSupervisor(nats, () => {});
  after(() => supervisor.close());
  const abort = new AbortController();
  const seen: StoredEvent<JetcronEvent>[] = [];
  const commitPartsPerBatch: number[] = [];
  const reading = readEvents(nats, { startSeq: 1, maxBatch: 2, signal: abort.signal, log: () => {}, name: 'commit-test', supervisor }, async (batch) => {
    commitPartsPerBatch.push(batch.filter((e) => e.seq === 2).length);
    seen.push(...batch);
    if (seen.length >= 5) abort.abort();
  });
  await reading;
  assert.deepEqual(seen.map((e) => [e.event.id, e.seq, e.index ?? 0]), [
    ['probe-1', 1, 0],
    ['probe-2', 2, 0],
    ['probe-3', 2, 1],
    ['probe-4', 2, 2],
    ['probe-5', 3, 0],
  ]);
  // A batch is whole messages: the commit's events never straddle two batches.
  assert.deepEqual(commitPartsPerBatch.filter((n) => n > 0), [3]);
});

test('a batch counting events holds a commit alone once it reaches the limit; a range read ends by itself after its last message', async () => {
  const supervisor = await openSupervisor(nats, () => {});
  after(() => supervisor.close());
  const batchesOf = async (countEvents: boolean) => {
    const batches: number[][] = [];
    const done = await readEvents(nats, { startSeq: 2, through: 3, countEvents, maxBatch: 2, signal: new AbortController().signal, log: () => {}, name: 'count-test', supervisor }, async (batch) => {
      batches.push(batch.map((e) => e.seq));
    });
    return { done, batches };
  };
  assert.deepEqual(await batchesOf(true), { done: true, batches: [[2, 2, 2], [3]] });
  assert.deepEqual(await batchesOf(false), { done: true, batches: [[2, 2, 2, 3]] });
});

test('the event store loads a commit subject\'s last event and a commit\'s first by sequence', async () => {
  const store = createEventStore(nats);
  assert.equal((await store.last('evt.org_x.lane.k'))?.event.id, 'probe-4');
  assert.equal((await store.at(2))?.event.id, 'probe-2');
});

/** A keyed reader of the test stream under its own checkpoint `name`: its run, its stop, and where its checkpoint stands. */
async function keyedReading(name: string, handlers: Pick<Parameters<typeof readEventsKeyed>[0], 'handle' | 'settle'>) {
  const supervisor = await openSupervisor(nats, () => {});
  after(() => supervisor.close());
  const kv = await new Kvm(nats.js).open(KV_BUCKETS.checkpoints.name);
  const abort = new AbortController();
  const reading = readEventsKeyed({
    nats, kv, name, checkpointKey: name, checkpointEveryMs: 20, signal: abort.signal, log: () => {}, supervisor,
    keyOf: (e) => e.event.id,
    ...handlers,
  });
  const checkpoint = async () => Number(new TextDecoder().decode((await kv.get(name))?.value ?? new Uint8Array()) || 0);
  return { checkpoint, stop: async () => { abort.abort(); await reading; } };
}

test('a keyed reader runs every event of a commit and checkpoints past it only when all have finished', async () => {
  const handled: string[] = [];
  let releaseSlow!: () => void;
  const slow = new Promise<void>((r) => (releaseSlow = r));
  let sawAll!: () => void;
  const all = new Promise<void>((r) => (sawAll = r));
  let sawFour!: () => void;
  const four = new Promise<void>((r) => (sawFour = r));
  const { checkpoint, stop } = await keyedReading(`commit-test-${Date.now()}`, {
    handle: async (e) => {
      if (e.event.id === 'probe-3') await slow;
      handled.push(e.event.id);
      if (handled.length === 4) sawFour();
      if (handled.length === 5) sawAll();
    },
  });
  // Every other event finishes; probe-3 (the commit's middle one) holds the commit back.
  await four;
  assert.deepEqual([...handled].sort(), ['probe-1', 'probe-2', 'probe-4', 'probe-5']);
  // One-sided: a slow machine may tick fewer times, never make a wrong checkpoint right.
  await new Promise((r) => setTimeout(r, 100));
  assert.ok((await checkpoint()) <= 1, `checkpoint ${await checkpoint()} passed an unfinished commit`);
  releaseSlow();
  await all;
  await stop();
  assert.equal(await checkpoint(), 3);
});

test('a keyed reader waits for what settle left to do before its checkpoint passes it; a settled write that fails is handled afresh', async () => {
  const handled: string[] = [];
  let finishWrite!: () => void;
  const write = new Promise<void>((r) => (finishWrite = r));
  let sawRest!: () => void;
  const rest = new Promise<void>((r) => (sawRest = r));
  const { checkpoint, stop } = await keyedReading(`commit-settle-${Date.now()}`, {
    settle: (e) => (e.event.id === 'probe-1' ? write : e.event.id === 'probe-5' ? Promise.reject(new Error('the write was lost')) : false),
    handle: async (e) => {
      handled.push(e.event.id);
      if (handled.length === 4) sawRest();
    },
  });
  await rest;
  assert.deepEqual([...handled].sort(), ['probe-2', 'probe-3', 'probe-4', 'probe-5'], 'probe-1 settled; probe-5 handled after its write failed');
  // One-sided: a slow machine may tick fewer times, never make a wrong checkpoint right.
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(await checkpoint(), 0, 'the checkpoint waits for probe-1\'s write');
  finishWrite();
  const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
  await eventually(async () => (await checkpoint()) >= last, 60_000);
  await stop();
  assert.equal(await checkpoint(), last);
  assert.equal(handled.includes('probe-1'), false);
});

test('a keyed reader records an event of a commit that keeps failing by sequence and index, goes on, and a retry runs that event alone', async () => {
  const failures = await new Kvm(nats.js).open(KV_BUCKETS.failures.name);
  const name = `commit-poison-${Date.now()}`;
  const handled: string[] = [];
  let broken = true;
  const { stop } = await keyedReading(name, {
    handle: async (e) => {
      if (e.event.id === 'probe-3' && broken) throw new Error('probe-3 is poison');
      handled.push(e.event.id);
    },
  });
  try {
    const key = failureKey(name, 2, 1);
    const recorded = async () => {
      const e = await failures.get(key);
      return e && e.operation === 'PUT' && e.value.length ? e.json<FailureRecord>() : null;
    };
    const record = await waitFor(recorded);
    assert.equal(record.index, 1);
    assert.equal(record.event_id, 'probe-3');
    assert.equal(record.event_type, 'Probe');
    assert.equal(await failures.get(failureKey(name, 2)), null, 'no record of the whole commit');
    await waitFor(async () => handled.length === 4);
    assert.deepEqual([...handled].sort(), ['probe-1', 'probe-2', 'probe-4', 'probe-5']);

    broken = false;
    await failures.put(key, JSON.stringify({ ...record, state: 'retry' }));
    await waitFor(async () => (await recorded()) === null);
    assert.deepEqual(handled.slice(4), ['probe-3'], 'the retry ran that event, not its commit');
  } finally {
    await stop();
  }
});

async function waitFor<T>(check: () => Promise<T | null | false>): Promise<T> {
  for (let i = 0; i < 300; i++) {
    const got = await check();
    if (got) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('timed out waiting');
}
