import type { KV } from '@nats-io/kv';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { createKeyedPipeline } from './keyed-pipeline.ts';
import type { Nats } from './connection.ts';
import { failedEventOf, readEvents } from './event-reader.ts';
import { untilDoneOrSkipped, type FailedItem, type Supervisor } from './supervisor.ts';
import { openCheckpoint } from './throttled-checkpoint.ts';

/**
 * Reads EVENTS from a KV checkpoint and runs each event as soon as its key is free
 * (same key: in order; different keys: concurrently). The checkpoint only passes
 * events that have finished, so a restart replays just the unfinished tail.
 * Used by the single active notifier reader while it holds its lease.
 * An event that keeps failing is recorded and skipped by the supervisor (its key's
 * chain then goes on); one that fails transiently is retried until it passes.
 */
export function readEventsKeyed(opts: KeyedReadOptions<StoredEvent<JetcronEvent>>): Promise<void> {
  return readKeyed(opts, (read, handle) =>
    readEvents(opts.nats, { ...read, reapply: async (events) => { for (const e of events) await opts.handle(e); } }, handle));
}

interface KeyedReadOptions<I> {
  nats: Nats;
  kv: KV;
  name: string;
  checkpointKey: string;
  checkpointEveryMs: number;
  signal: AbortSignal;
  log: (m: string) => void;
  supervisor: Supervisor;
  keyOf: (e: I) => string;
  handle: (e: I) => Promise<void>;
  /** Events this reader has nothing to do with: passed in order, without a chain (the notifier's `IGNORED_TYPES`). */
  skip?: (e: I) => boolean;
  /** Decides an event at once when its key is idle; true: done; a promise: done once it resolves (see `KeyedHandlers.settle`). */
  settle?: (e: I) => boolean | Promise<void>;
}

type Reader<I> = (
  read: { startSeq: number; maxBatch: number; signal: AbortSignal; log: (m: string) => void; name: string; supervisor: Supervisor; trackProgress: false },
  handle: (batch: I[]) => Promise<void>,
) => Promise<unknown>;

async function readKeyed<I extends { seq: number; subject: string; index?: number; event: { id: string; type: string } }>(opts: KeyedReadOptions<I>, reader: Reader<I>): Promise<void> {
  const { signal, supervisor } = opts;
  const checkpoint = await openCheckpoint(opts.kv, opts.checkpointKey, opts.checkpointEveryMs);
  const pipeline = createKeyedPipeline({ maxInFlight: 2000, retryMs: 500, log: (m) => opts.log(`${opts.name}: ${m}`) });
  const progress = supervisor.progress(opts.name, 'EVENTS');
  progress.started(checkpoint.position);
  const advance = () => {
    if (pipeline.completed <= checkpoint.position) return Promise.resolve();
    progress.advanced(pipeline.completed);
    return checkpoint.advance(pipeline.completed);
  };
  const ticking = setInterval(() => void advance().catch(() => {}), opts.checkpointEveryMs);
  const stopped = () => signal.aborted;
  // Done or skipped (recorded): the checkpoint may pass it. Stopped mid-way: it may not.
  const runItem = async (item: FailedItem, work: () => Promise<void>) => (await untilDoneOrSkipped(supervisor, opts.name, item, work, stopped)) || !stopped();
  try {
    const read = { startSeq: checkpoint.position + 1, maxBatch: 500, signal, log: opts.log, name: opts.name, supervisor, trackProgress: false as const };
    await reader(read, async (events) => {
      for (let i = 0; i < events.length; i++) {
        const e = events[i]!;
        // A commit's events share its seq: the checkpoint passes it once all of them finished.
        pipeline.hold(e.seq);
        if (opts.skip?.(e)) {
          pipeline.pass(e.seq);
          continue;
        }
        const key = opts.keyOf(e);
        const settled = opts.settle && pipeline.idle(key) ? opts.settle(e) : false;
        if (settled === true) {
          pipeline.pass(e.seq);
          continue;
        }
        // An event of a commit of several fails on its own: its record names it, and a retry runs it alone.
        const inCommit = (e.index ?? 0) > 0 || events[i + 1]?.seq === e.seq;
        const item = { stream: 'EVENTS', seq: e.seq, subject: e.subject, ...(inCommit ? { event: failedEventOf(e) } : {}) };
        // Settled with a write on its way: the chain waits for it; a failed one is handled afresh.
        let pending = settled || undefined;
        const work = () => {
          const left = pending ?? opts.handle(e);
          pending = undefined;
          return left;
        };
        await pipeline.push(key, e.seq, () => runItem(item, work), stopped);
      }
      pipeline.release();
      await advance();
    });
  } finally {
    progress.stopped();
    clearInterval(ticking);
    await pipeline.drain();
    await advance().catch(() => {});
    await checkpoint.close().catch(() => {});
  }
}
