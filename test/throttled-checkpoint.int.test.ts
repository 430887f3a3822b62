/**
 * A reader's checkpoint in KV: at most one write on its way, at most one write per
 * period under a steady stream of advances, the last position stored on close, and
 * nothing written after it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import type { Nats } from '../src/nats/connection.ts';
import { openCheckpoint } from '../src/nats/throttled-checkpoint.ts';
import { startNatsWithStreams } from './support/nats.ts';
import { eventually } from './support/wait.ts';

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
before(async () => {
  server = await startNatsWithStreams();
  nats = await server.connect('checkpoint-test');
});
after(async () => {
  await nats.close();
  await server.stop();
});

/** The bucket itself, its puts counted as they go (the writes are real). */
function counted(kv: KV) {
  const seen = { puts: 0, inFlight: 0, maxInFlight: 0 };
  const put = kv.put.bind(kv);
  kv.put = async (...args: Parameters<KV['put']>) => {
    seen.puts++;
    seen.maxInFlight = Math.max(seen.maxInFlight, ++seen.inFlight);
    try {
      return await put(...args);
    } finally {
      seen.inFlight--;
    }
  };
  return seen;
}

test('advances after every batch: one put on its way at a time, a put per period, the last position stored on close', async () => {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.checkpoints.name);
  const seen = counted(kv);
  const checkpoint = await openCheckpoint(kv, 'probe-steady', 100);
  const started = Date.now();
  let seq = 0;
  // 300 batches a millisecond or more apart, each advancing the position, not waiting for it (a reader's interval advances too).
  while (seq < 300) {
    void checkpoint.advance(++seq);
    await new Promise((r) => setTimeout(r, 1));
  }
  const elapsed = Date.now() - started;
  assert.equal(seen.maxInFlight, 1);
  // One write at once, then one per 100 ms at most (the count bounds the pace; no timing is asserted).
  assert.ok(seen.puts >= 1 && seen.puts <= Math.ceil(elapsed / 100) + 1, `${seen.puts} puts over ${elapsed} ms`);
  await checkpoint.close();
  assert.equal(Number((await kv.get('probe-steady'))!.string()), seq);
  const after = seen.puts;
  await checkpoint.advance(seq + 1);
  await new Promise((r) => setTimeout(r, 250));
  assert.equal(seen.puts, after, 'nothing is written after close');
  assert.equal(Number((await kv.get('probe-steady'))!.string()), seq);
});

test('a position advanced once is stored within a period, with no further advance', async () => {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.checkpoints.name);
  const checkpoint = await openCheckpoint(kv, 'probe-once', 50);
  await checkpoint.advance(7);
  await checkpoint.advance(9);
  // Awaited, not counted: a hundred reads 20 ms apart were a deadline a busy machine could miss.
  await eventually(async () => (await kv.get('probe-once'))?.string() === '9');
  const reopened = await openCheckpoint(kv, 'probe-once', 50);
  assert.equal(reopened.position, 9);
  await checkpoint.close();
  await reopened.close();
});
