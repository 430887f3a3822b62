/**
 * A rebuild's preparing thread (a worker_threads worker): reads the log's range once,
 * decodes each message, merges its events into batches (`ProjectionBatch`) and encodes
 * each batch's statements, which it hands to the writing thread as plain data. The
 * writing thread holds the projector lease and the Postgres transaction; this one
 * touches neither, so it may be stopped at any moment without leaving anything behind.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { decodeEvents } from '../nats/event-reader.ts';
import { connectNats } from '../nats/connection.ts';
import { readRange } from '../nats/range-reader.ts';
import { applyEvent } from './apply-event.ts';
import { ProjectionBatch } from './batch.ts';
import { batchLimit } from './batch-limit.ts';
import { toPortable } from './portable-statements.ts';
import { BATCHES_AHEAD, type PrepareThreadConfig, type PreparedMessage, type WrittenMessage } from './prepare-protocol.ts';

const config = workerData as PrepareThreadConfig;
/** The first batch, and the last ones, are this small (batch-limit.ts): a thread waits for the other at the ends. */
const FIRST_BATCH = 5_000;
const port = parentPort!;
const send = (m: PreparedMessage, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);

let ahead = 0;
let room: (() => void) | undefined;
port.on('message', (m: WrittenMessage) => {
  if (m.type !== 'written') return;
  ahead--;
  room?.();
  room = undefined;
});

async function main(): Promise<void> {
  const nats = await connectNats(config.natsUrl, 'jetcron rebuild (preparing)');
  const reading = new AbortController();
  try {
    let batch = new ProjectionBatch();
    let first = 0;
    let last = 0;
    let shipped = 0;
    let eventsRead = 0;
    let messagesRead = 0;
    const ship = async () => {
      const { statements, transfer } = toPortable(batch.statements({ copyCreated: true }));
      send({ type: 'batch', first, last, events: batch.size, statements }, transfer);
      batch = new ProjectionBatch();
      first = 0;
      shipped++;
      if (++ahead >= BATCHES_AHEAD) await new Promise<void>((r) => (room = r));
    };
    const range = readRange(nats, {
      stream: config.stream, startSeq: config.startSeq, endSeq: config.through, signal: reading.signal,
      log: (message) => send({ type: 'log', message }), name: 'rebuild',
    });
    for await (const items of range) {
      for (const item of items) {
        try {
          const events = decodeEvents(item.data);
          for (const e of events) applyEvent(batch, e);
          eventsRead += events.length;
        } catch (err) {
          // The batch may hold part of this message now: it is dropped, the careful path takes its messages.
          send({ type: 'cannot-prepare', seq: item.seq, reason: (err as Error).message });
          return;
        }
        first ||= item.seq;
        last = item.seq;
        messagesRead++;
        const limit = batchLimit({ max: config.maxBatch, first: FIRST_BATCH, shipped, eventsRead, messagesRead, messagesLeft: config.through - item.seq });
        if (batch.size >= limit) await ship();
      }
    }
    if (batch.size) await ship();
    send({ type: 'end' });
  } finally {
    reading.abort();
    // After its last word, nothing here may fail the rebuild.
    await nats.close().catch(() => {});
  }
}

// Anything thrown ends the thread with an error: the writing thread reports it and stops.
await main();
port.close();
