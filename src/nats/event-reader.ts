import { DeliverPolicy } from '@nats-io/jetstream';
import { STREAMS } from '../../streams/definitions.ts';
import type { StoredEvent } from '../events/envelope.ts';
import type { JetcronEvent } from '../events/types.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from './connection.ts';

export interface EventReaderOptions {
  /** First stream sequence to deliver. */
  startSeq: number;
  maxBatch: number;
  signal: AbortSignal;
  log: (msg: string) => void;
  name: string;
}

/** One stored message as a reader hands it on: its decoded content, sequence and subject. */
export interface StreamItem<T> {
  event: T;
  seq: number;
  subject: string;
}

/** Reads EVENTS: see `readStream`. */
export function readEvents(
  nats: Nats,
  opts: EventReaderOptions,
  handle: (batch: StoredEvent<JetcronEvent>[]) => Promise<void>,
): Promise<void> {
  return readStream(nats, { ...opts, stream: STREAMS.events.name, decode: (data) => decodeJson<JetcronEvent>(data) }, handle);
}

/**
 * Reads a stream in order with an ordered consumer and hands the handler
 * batches: whatever has arrived, up to maxBatch. A failing handler gets the same
 * batch again after a pause, so nothing is skipped. Resolves when `signal` aborts.
 */
export async function readStream<T>(
  nats: Nats,
  opts: EventReaderOptions & { stream: string; decode: (data: Uint8Array) => T },
  handle: (batch: StreamItem<T>[]) => Promise<void>,
): Promise<void> {
  const consumer = await nats.js.consumers.get(opts.stream, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, opts.startSeq),
  });
  const messages = await consumer.consume({ max_messages: Math.max(100, opts.maxBatch) });
  const buffer: StreamItem<T>[] = [];
  let wake: (() => void) | undefined;
  let drained: (() => void) | undefined;
  const onAbort = () => {
    void messages.close();
    wake?.();
    drained?.();
  };
  opts.signal.addEventListener('abort', onAbort, { once: true });

  const pump = (async () => {
    for await (const m of messages) {
      // Stopped: what the closed iterator still yields is not needed, and waiting for
      // room after the abort would wait forever (nothing drains the buffer any more).
      if (opts.signal.aborted) break;
      buffer.push({ event: opts.decode(m.data), seq: m.seq, subject: m.subject });
      wake?.();
      if (buffer.length >= opts.maxBatch * 4 && !opts.signal.aborted) await new Promise<void>((r) => (drained = r));
    }
  })();

  try {
    while (!opts.signal.aborted) {
      if (!buffer.length) {
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      const batch = buffer.slice(0, opts.maxBatch);
      try {
        await handle(batch);
        buffer.splice(0, batch.length);
        if (buffer.length < opts.maxBatch) {
          drained?.();
          drained = undefined;
        }
      } catch (err) {
        opts.log(`${opts.name}: batch at seq ${batch[0]!.seq} failed, retrying: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    opts.signal.removeEventListener('abort', onAbort);
    await messages.close();
    await pump.catch(() => {});
  }
}
