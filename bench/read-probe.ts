/**
 * The CPU of reading EVENTS alone, in one process: the events tap (the live readers'
 * path) against the range reader (a rebuild's and a replay's), over the rebuild
 * benchmark's store, in interleaved rounds:
 * `node bench/read-probe.ts [--decode] [--shape commits|events] [--rounds 3]`.
 * `--decode` also decodes each message as the readers do. Each line: messages read,
 * wall seconds, CPU seconds of this process (`process.cpuUsage`).
 */
import { parseArgs } from 'node:util';
import { STREAMS } from '../streams/definitions.ts';
import { connectNats } from '../src/nats/connection.ts';
import { decodeEvents } from '../src/nats/event-reader.ts';
import { followEvents } from '../src/nats/events-tap.ts';
import { readRange } from '../src/nats/range-reader.ts';
import { cleanupAll, startNats } from './harness.ts';
import { buildEventStore, type StoreShape } from './rebuild.ts';

const { values } = parseArgs({ options: { decode: { type: 'boolean', default: false }, shape: { type: 'string', default: 'events' }, rounds: { type: 'string', default: '3' } } });

/** Runs `read` and prints what it read with the time and CPU it took. */
async function measure(label: string, read: () => Promise<number>): Promise<void> {
  const t0 = performance.now();
  const u0 = process.cpuUsage();
  const count = await read();
  const u = process.cpuUsage(u0);
  console.log(`${label.padEnd(6)} ${count} messages, ${((performance.now() - t0) / 1000).toFixed(2)} s wall, ${((u.user + u.system) / 1e6).toFixed(2)} s CPU`);
}

const server = await startNats();
try {
  const store = await buildEventStore(server.url, values.shape as StoreShape);
  console.log(`store (${values.shape}): ${store.events} events in ${store.messages} messages`);
  const nats = await connectNats(server.url, 'read probe');
  const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
  const opts = { signal: new AbortController().signal, log: console.log, name: 'probe' };
  for (let round = 0; round < Number(values.rounds); round++) {
    await measure('tap', async () => {
      const stop = new AbortController();
      let count = 0;
      for await (const item of followEvents(nats, { ...opts, startSeq: 1, signal: stop.signal, maxMessages: 10_000 })) {
        count++;
        if (values.decode) item.decoded ??= decodeEvents(item.data);
        if (item.seq >= last) break;
      }
      stop.abort();
      return count;
    });
    await measure('range', async () => {
      let count = 0;
      for await (const batch of readRange(nats, { ...opts, stream: STREAMS.events.name, startSeq: 1, endSeq: last })) {
        count += batch.length;
        if (values.decode) for (const item of batch) decodeEvents(item.data);
      }
      return count;
    });
  }
  await nats.close();
} finally {
  await server.stop();
  await cleanupAll();
}
