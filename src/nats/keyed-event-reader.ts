import type { KV } from '@nats-io/kv';
import type { StoredEvent } from '../events/envelope.ts';
import type { JetcronEvent } from '../events/types.ts';
import { createKeyedPipeline } from '../scheduler/keyed-pipeline.ts';
import type { Nats } from './connection.ts';
import { readEvents } from './event-reader.ts';
import { openCheckpoint } from './throttled-checkpoint.ts';

/**
 * Reads EVENTS from a KV checkpoint and runs each event as soon as its key is free
 * (same key: in order; different keys: concurrently). The checkpoint only passes
 * events that have finished, so a restart replays just the unfinished tail.
 * Used by the single active translator and notifier reader while they hold their lease.
 */
export function readEventsKeyed(opts: KeyedReadOptions<StoredEvent<JetcronEvent>>): Promise<void> {
  return readKeyed(opts, (read, handle) => readEvents(opts.nats, read, handle));
}

interface KeyedReadOptions<I> {
  nats: Nats;
  kv: KV;
  name: string;
  checkpointKey: string;
  checkpointEveryMs: number;
  signal: AbortSignal;
  log: (m: string) => void;
  keyOf: (e: I) => string;
  handle: (e: I) => Promise<void>;
}

type Reader<I> = (
  read: { startSeq: number; maxBatch: number; signal: AbortSignal; log: (m: string) => void; name: string },
  handle: (batch: I[]) => Promise<void>,
) => Promise<void>;

async function readKeyed<I extends { seq: number }>(opts: KeyedReadOptions<I>, reader: Reader<I>): Promise<void> {
  const { signal } = opts;
  const checkpoint = await openCheckpoint(opts.kv, opts.checkpointKey, opts.checkpointEveryMs);
  const pipeline = createKeyedPipeline({ maxInFlight: 2000, retryMs: 500, log: (m) => opts.log(`${opts.name}: ${m}`) });
  const advance = () => (pipeline.completed > checkpoint.position ? checkpoint.advance(pipeline.completed) : Promise.resolve());
  const progress = setInterval(() => void advance().catch(() => {}), opts.checkpointEveryMs);
  try {
    const read = { startSeq: checkpoint.position + 1, maxBatch: 500, signal, log: opts.log, name: opts.name };
    await reader(read, async (events) => {
      for (const e of events) await pipeline.push(opts.keyOf(e), e.seq, () => opts.handle(e), () => signal.aborted);
      await advance();
    });
  } finally {
    clearInterval(progress);
    await pipeline.drain();
    await advance().catch(() => {});
    await checkpoint.flush().catch(() => {});
  }
}
