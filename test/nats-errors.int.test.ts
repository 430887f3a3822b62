import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { STREAMS } from '../streams/definitions.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import { applyStreams } from '../src/nats/apply-streams.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { createLease, openLeaseBucket, whileLeased, type Lease } from '../src/nats/lease.ts';
import { quickManager } from '../src/nats/quick-clients.ts';
import { ensureCheckpoint } from '../src/notifier/reader.ts';
import { isTransient } from '../src/lib/transient.ts';
import { startTestNats } from './support/nats.ts';
import { eventually } from './support/wait.ts';

// "A call that failed is not an answer": with the server frozen (SIGSTOP) every request
// times out; the paths that decide whether work runs must reject (so it is retried),
// never conclude "absent" or "lost".
describe('NATS errors are unknown, never absent', () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  before(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, 'nats-errors test');
    await applyStreams(nats, 1);
  });
  after(async () => {
    await nats.close();
    await server.stop();
  });

  const frozen = async <T>(fn: () => Promise<T>): Promise<PromiseSettledResult<T>> => {
    const resume = await server.freeze();
    try {
      return (await Promise.allSettled([fn()]))[0]!;
    } finally {
      resume();
    }
  };

  test('a lease keeps its holder through renewals that time out, and is dropped before it could expire', async () => {
    const kv = await openLeaseBucket(nats);
    const logs: string[] = [];
    const lease = createLease(kv, 'test-stall', 'owner-a', (m) => logs.push(m));
    let lostAt = 0;
    lease.onLost(() => (lostAt = Date.now()));
    await lease.acquire(AbortSignal.timeout(5000));
    // A stall shorter than the TTL: the renewal due at 3.3 s times out (2 s), is retried, and the lease is kept.
    // The stall ends once that failure is logged (5.3 s in), not after a fixed 6 s counted from a start a busy
    // machine delays: the retry 1 s later goes through, 2.7 s before the holder would stop.
    const resume = await server.freeze();
    try {
      await eventually(() => logs.some((l) => /renewal failed/.test(l)) || lostAt > 0, 30_000, 20);
    } finally {
      resume();
    }
    // The next renewal after the stall goes through (awaited, not a fixed 2.5 s).
    await eventually(() => logs.some((l) => /renewed again/.test(l)) || lostAt > 0, 30_000, 20);
    assert.equal(lostAt, 0, `lease dropped during a short stall: ${logs.join(' | ')}`);
    assert.ok(logs.some((l) => /renewal failed/.test(l)), logs.join(' | '));
    assert.ok(logs.some((l) => /renewed again/.test(l)), logs.join(' | '));
    const held = await kv.get('test-stall');
    assert.equal(held?.string(), 'owner-a', `key now: ${held?.operation} ${held?.string()} | ${logs.join(' | ')}`);
    // A stall past the TTL: the holder stops before the key can have expired (TTL 10 s, margin 2 s).
    // What guards the work is held(), which every user asks before acting, by the monotonic clock: it must
    // never say yes 8 s or more after the stall began (no renewal can be answered during it). The lost
    // callback's timer may fire late on a busy machine, so when it fires is not a verdict; that it fires is.
    const resume2 = await server.freeze();
    const frozenAt = performance.now();
    const heldLate: number[] = [];
    try {
      await eventually(() => {
        const into = performance.now() - frozenAt;
        if (lease.held() && into >= 8_000) heldLate.push(Math.round(into));
        return lostAt > 0;
      }, 30_000, 20);
    } finally {
      resume2();
    }
    assert.deepEqual(heldLate, [], 'held() said yes 8 s or more into the stall: past the 10 s TTL minus the margin');
    assert.ok(logs.some((l) => /lost \(no renewal for/.test(l)), logs.join(' | '));
    await lease.release();
  });

  test('a lease whose create answer was lost is recognised as ours', async () => {
    const kv = await openLeaseBucket(nats);
    // Our write landed but we never heard: the key names us.
    await kv.create('test-own', 'owner-b');
    const lease = createLease(kv, 'test-own', 'owner-b');
    await lease.acquire(AbortSignal.timeout(3000));
    const other = createLease(kv, 'test-own', 'owner-c');
    await assert.rejects(other.acquire(AbortSignal.timeout(1200)), /aborted/);
    await lease.release();
    assert.equal((await kv.get('test-own'))?.operation, 'DEL');
  });

  test('a stop that comes while the lease is being taken ends the work it then starts', async () => {
    const kv = await openLeaseBucket(nats);
    const real = createLease(kv, 'test-stop-race', 'owner-d');
    const stop = new AbortController();
    // The lease is won just as the stop comes (another holder released it at its own stop).
    const lease: Lease = { ...real, acquire: async (signal) => {
      await real.acquire(signal);
      stop.abort();
    } };
    let started = 0;
    const ended = whileLeased(lease, stop.signal, () => {}, (signal) => {
      started++;
      return new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
    }).then(() => 'ended');
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([ended, new Promise((r) => (timer = setTimeout(r, 30_000, 'still working')))]);
    clearTimeout(timer);
    assert.equal(outcome, 'ended', 'the work must see the stop that came while the lease was taken');
    assert.equal(started, 1);
    assert.equal((await kv.get('test-stop-race'))?.operation, 'DEL', 'released at the end');
  });

  test('the notifier\'s first checkpoint is written through a stall, not skipped', async () => {
    const kv = await new Kvm(nats.nc).open('checkpoints');
    await kv.purge('notifier').catch(() => {});
    const last = await nats.publish('evt.org_x.org', new TextEncoder().encode('{}'));
    const resume = await server.freeze();
    const done = ensureCheckpoint(nats, () => {});
    setTimeout(resume, 3000);
    await done;
    const written = await kv.get('notifier');
    assert.equal(written?.operation, 'PUT', 'the checkpoint was written after the stall');
    assert.equal(Number(written!.string()), last, 'it starts at the end of the log');
  });
});
