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

/**
 * Reads EVENTS in stream order with an ordered consumer and hands the handler
 * batches: whatever has arrived, up to maxBatch. A failing handler gets the same
 * batch again after a pause, so nothing is skipped. Resolves when `signal` aborts.
 */
export async function readEvents(
  nats: Nats,
  opts: EventReaderOptions,
  handle: (batch: StoredEvent<JetcronEvent>[]) => Promise<void>,
): Promise<void> {
  const consumer = await nats.js.consumers.get(STREAMS.events.name, {
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: Math.max(1, opts.startSeq),
  });
  const messages = await consumer.consume({ max_messages: Math.max(100, opts.maxBatch) });
  const buffer: StoredEvent<JetcronEvent>[] = [];
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
      buffer.push({ event: decodeJson<JetcronEvent>(m.data), seq: m.seq, subject: m.subject });
      wake?.();
      if (buffer.length >= opts.maxBatch * 4) await new Promise<void>((r) => (drained = r));
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
