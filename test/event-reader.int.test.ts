import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { applyStreams } from '../src/nats/apply-streams.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { readStream } from '../src/nats/event-reader.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { startTestNats } from './support/nats.ts';

let server: Awaited<ReturnType<typeof startTestNats>>;
let nats: Nats;
before(async () => {
  server = await startTestNats();
  nats = await connectNats(server.url, 'event-reader test');
  await applyStreams(nats, 1);
  await nats.jsm.streams.add({ name: 'R', subjects: ['r.>'], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
  for (let i = 0; i < 300; i++) await nats.publish('r.x', new TextEncoder().encode(String(i)));
});
after(async () => {
  await nats.close();
  await server.stop();
});

// A reader whose handler is slower than the stream fills its buffer; a stop must
// still end it (it used to wait for room in a buffer no one drained any more).
test('readStream ends on abort while its buffer is full and the handler is busy', async () => {
  const supervisor = await openSupervisor(nats, () => {});
  after(() => supervisor.close());
  const abort = new AbortController();
  let release!: () => void;
  const busy = new Promise<void>((r) => (release = r));
  const seen: number[] = [];
  const reading = readStream(
    nats,
    { stream: 'R', decode: (d: Uint8Array) => Number(new TextDecoder().decode(d)), startSeq: 1, maxBatch: 5, signal: abort.signal, log: () => {}, name: 'test', supervisor },
    async (batch) => {
      seen.push(...batch.map((b) => b.event));
      await busy;
    },
  );
  await new Promise((r) => setTimeout(r, 300)); // the pump fills the buffer (20) while the first batch waits
  abort.abort();
  release();
  // A hang detector, generous: a slow machine makes this slower, not red.
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([reading.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 30_000)))]);
  clearTimeout(timer);
  assert.equal(ended, true, 'readStream did not end within 30 s of the abort');
  assert.equal(seen[0], 0);
});
