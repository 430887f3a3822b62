import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { Nats } from '../src/nats/connection.ts';
import { eventsTapRing, followEvents, forgetWriting, tuneEventsTap, writingCommit, type TapItem } from '../src/nats/events-tap.ts';
import { decodeEvents } from '../src/nats/event-reader.ts';
import { startNatsWithStreams } from './support/nats.ts';
import { eventually } from './support/wait.ts';

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
before(async () => {
  server = await startNatsWithStreams();
  await publish(await server.connect('events-tap setup'), 200);
});
after(() => server.stop());

// A failed test must not leave a reader waiting forever (the run would never end).
const running: AbortController[] = [];
afterEach(() => {
  for (const a of running.splice(0)) a.abort();
});

async function publish(nats: Nats, n: number): Promise<void> {
  const at = (await nats.jsm.streams.info('EVENTS')).state.last_seq;
  await Promise.all(Array.from({ length: n }, (_, i) => nats.publish(`evt.org_tap.task.t${(at + i) % 7}`, new TextEncoder().encode(String(at + i + 1)))));
}

async function connection(bounds?: { ringSize: number; lagLimit: number; ringBytes?: number }): Promise<Nats> {
  const nats = await server.connect('events-tap test');
  if (bounds) tuneEventsTap(nats, bounds);
  return nats;
}

/** Reads from `startSeq` until `untilSeq`, keeping every item; `pace` runs before each next item is taken. */
function reader(nats: Nats, startSeq: number, untilSeq: () => number, pace?: () => Promise<void>) {
  const abort = new AbortController();
  running.push(abort);
  const items: TapItem[] = [];
  const done = (async () => {
    for await (const item of followEvents(nats, { startSeq, signal: abort.signal, log: () => {}, name: `test-${startSeq}`, maxMessages: 100 })) {
      items.push(item);
      if (item.seq >= untilSeq()) break;
      await pace?.();
    }
  })();
  return { items, done, abort };
}

const lastSeq = async (nats: Nats) => (await nats.jsm.streams.info('EVENTS')).state.last_seq;
const seqs = (items: TapItem[]) => items.map((i) => i.seq);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const eventuallyTrue = (check: () => boolean, what: string) =>
  eventually(check, 30_000, 20).catch((err: Error) => assert.fail(`${what}: ${err.message}`));
/** A hang detector, generous: a slow machine makes the test slower, never red. */
const within = <T>(p: Promise<T>, what: string) => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: not within 30 s`)), 30_000)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};

test('readers of one connection get every event from their own start, in order, and share the items once they read together', async () => {
  const nats = await connection();
  const stored = await lastSeq(nats);
  const end = stored + 30;
  const a = reader(nats, 1, () => end);
  const b = reader(nats, 50, () => end);
  const c = reader(nats, stored - 10, () => end);
  // Each catches up on what is stored, then they meet at the live end of the log.
  await eventuallyTrue(() => [a, b, c].every((r) => r.items.at(-1)?.seq === stored), 'all three at the end of the log');
  for (let i = 0; i < 30; i++) {
    await publish(nats, 1);
    await new Promise((r) => setTimeout(r, 10));
  }
  await within(Promise.all([a.done, b.done, c.done]), 'three readers');
  assert.deepEqual(seqs(a.items), range(1, end));
  assert.deepEqual(seqs(b.items), range(50, end));
  assert.deepEqual(seqs(c.items), range(stored - 10, end));
  // The last events were read once for all three: the very same objects.
  assert.equal(a.items.at(-1), b.items.at(-1));
  assert.equal(b.items.at(-1), c.items.at(-1));
});

test('a reader that stops taking events does not hold up the others; it goes on by itself, misses nothing, and joins again', async () => {
  const nats = await connection({ ringSize: 40, lagLimit: 30 });
  const start = (await lastSeq(nats)) + 1;
  const firstEnd = start + 299;
  const caughtUp = firstEnd + 100;
  const end = caughtUp + 20;
  let stuck = true;
  const slowAbort = () => running.at(-1)!.signal.aborted;
  const fast = reader(nats, start, () => firstEnd);
  const slow = reader(nats, start, () => end, async () => {
    while (stuck && !slowAbort()) await new Promise((r) => setTimeout(r, 20));
  });
  await publish(nats, 300);
  // The fast one gets everything while the slow one has taken a single event.
  await within(fast.done, 'the fast reader');
  assert.deepEqual(seqs(fast.items), range(start, firstEnd));
  assert.equal(slow.items.length, 1);
  // Then the slow one catches up on its own, without a gap or a repeat...
  const other = reader(nats, firstEnd + 1, () => end);
  stuck = false;
  await publish(nats, 100);
  await eventuallyTrue(() => slow.items.at(-1)?.seq === caughtUp && other.items.at(-1)?.seq === caughtUp, 'the slow reader catching up');
  // ...and shares the read again once it is back among the recent events.
  for (let i = 0; i < 20; i++) {
    await publish(nats, 1);
    await new Promise((r) => setTimeout(r, 10));
  }
  await within(Promise.all([slow.done, other.done]), 'both readers');
  assert.deepEqual(seqs(slow.items), range(start, end));
  assert.deepEqual(seqs(other.items), range(firstEnd + 1, end));
  assert.equal(slow.items.at(-1), other.items.at(-1));
});

test('a reader that stops (abort) ends at once, and the others go on', async () => {
  const nats = await connection();
  const from = await lastSeq(nats);
  const target = from + 20;
  const a = reader(nats, from, () => target);
  const b = reader(nats, from, () => Number.MAX_SAFE_INTEGER);
  // Both are reading (each has taken the stored event it starts at).
  await eventuallyTrue(() => a.items.length > 0 && b.items.length > 0, 'both readers started');
  b.abort.abort();
  await within(b.done, 'the aborted reader');
  await publish(nats, 20);
  await within(a.done, 'the other reader');
  assert.deepEqual(seqs(a.items), range(from, target));
});

test('the recent items are bounded by their memory too: large messages keep fewer; a reader starting before them reads on its own and misses nothing', async () => {
  const nats = await connection({ ringSize: 10_000, lagLimit: 10_000, ringBytes: 64 * 1024 });
  const start = (await lastSeq(nats)) + 1;
  const big = new Uint8Array(16 * 1024).fill(120);
  const end = start + 39;
  const first = reader(nats, start, () => end);
  // Stays, so the tap keeps reading (and its ring stays) while the late reader joins.
  const staying = reader(nats, start, () => Number.MAX_SAFE_INTEGER);
  await Promise.all(Array.from({ length: 40 }, () => nats.publish('evt.org_tap.task.big', big)));
  await within(first.done, 'the first reader');
  assert.deepEqual(seqs(first.items), range(start, end));
  await eventuallyTrue(() => staying.items.at(-1)?.seq === end, 'the staying reader');
  // 40 × 16 KiB went through; the ring keeps at most about twice its 64 KiB.
  const ring = eventsTapRing(nats);
  assert.ok(ring.bytes <= 2 * 64 * 1024 + 64 * 1024, `ring holds ${ring.bytes} bytes`);
  assert.ok(ring.items < 40, `ring keeps ${ring.items} of 40 items`);
  // A second reader from the start is older than the ring: it reads on its own, in order, whole.
  const late = reader(nats, start, () => end);
  await within(late.done, 'the late reader');
  assert.deepEqual(seqs(late.items), range(start, end));
  staying.abort.abort();
});

test('the recent items kept for readers that join are kept undecoded: a decode shared by the readers lives only as long as they hold it', async () => {
  const nats = await connection();
  const stored = await lastSeq(nats);
  const end = stored + 20;
  const a = reader(nats, stored + 1, () => end);
  // Another reader keeps the tap reading (and its recent items kept) after the first is done.
  const keep = reader(nats, stored + 1, () => Number.MAX_SAFE_INTEGER);
  await publish(nats, 20);
  await within(a.done, 'the first reader');
  await eventuallyTrue(() => keep.items.at(-1)?.seq === end, 'the other reader at the end');
  // The first reader decodes what it read, as readers do (shared with the readers of the same items).
  for (const item of a.items) item.decoded ??= { decodedBy: 'a' };
  // A reader that joins behind takes those messages from the tap's recent items.
  const b = reader(nats, stored + 1, () => end);
  await within(b.done, 'the reader that joined');
  assert.deepEqual(seqs(b.items), range(stored + 1, end));
  assert.ok(b.items.every((i) => i.decoded === undefined), 'no decode kept for it');
  assert.ok(eventsTapRing(nats).items >= 20, 'it joined from the recent items');
});

test('a commit this process wrote reaches its readers as the events it wrote, not decoded again; other bytes on that subject are decoded', async () => {
  const nats = await connection();
  const start = (await lastSeq(nats)) + 1;
  const subject = 'evt.partition.tap-own';
  const events = [{ type: 'AttemptStarted', id: 'e1', at: '2026-11-26T00:00:00.000Z', org_id: 'org_tap', data: { execution_id: 'exe_1' } }];
  const data = Buffer.from(JSON.stringify({ type: 'Commit', id: 'c1', at: events[0]!.at, events }));
  const r = reader(nats, start, () => start + 1);
  writingCommit(nats, subject, data, events);
  await nats.publish(subject, data);
  // Same subject, other bytes (a rival's commit after a takeover): read from the log as usual.
  const rival = Buffer.from(JSON.stringify({ type: 'Commit', id: 'c2', at: events[0]!.at, events: [{ ...events[0], id: 'e2' }] }));
  writingCommit(nats, subject, data, events);
  await nats.publish(subject, rival);
  await within(r.done, 'reader of two commits');
  assert.deepEqual(seqs(r.items), [start, start + 1]);
  assert.equal(r.items[0]!.decoded, events, 'the written events themselves');
  assert.equal(r.items[1]!.decoded, undefined, 'not taken for the written commit');
  assert.deepEqual(decodeEvents(r.items[1]!.data).map((e) => e.id), ['e2']);
  forgetWriting(nats, subject);
});
