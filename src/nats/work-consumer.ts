import type { JsMsg } from '@nats-io/jetstream';
import type { Nats } from './connection.ts';

export interface WorkConsumer {
  /** Stops taking work; in-flight items get `graceMs` to finish, then go back to the stream. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The one shape of a work-queue consumer: pull from a durable consumer with at most
 * `concurrency` items in flight; `handle` acks or naks each item itself, unless
 * `handedBack()` says a stop has already returned it to the stream.
 */
export function consumeWork(opts: {
  nats: Nats;
  stream: string;
  durable: string;
  concurrency: number;
  handle: (msg: JsMsg, handedBack: () => boolean) => Promise<void>;
}): WorkConsumer {
  let slotFree: (() => void) | undefined;
  let stopping = false;
  let stopPulling = () => {};
  const inFlight = new Map<JsMsg, Promise<void>>();
  const handedBack = new Set<JsMsg>();

  const done = (async () => {
    const consumer = await opts.nats.js.consumers.get(opts.stream, opts.durable);
    const messages = await consumer.consume({ max_messages: Math.min(opts.concurrency, 1000) });
    stopPulling = () => void messages.close();
    if (stopping) stopPulling();
    for await (const msg of messages) {
      if (stopping) {
        msg.nak();
        continue;
      }
      const p = opts.handle(msg, () => handedBack.has(msg)).catch(() => {}).finally(() => {
        inFlight.delete(msg);
        handedBack.delete(msg);
        slotFree?.();
        slotFree = undefined;
      });
      inFlight.set(msg, p);
      while (inFlight.size >= opts.concurrency) await new Promise<void>((r) => (slotFree = r));
    }
  })();

  return {
    async stop(graceMs = 10_000) {
      stopping = true;
      stopPulling();
      const all = Promise.all([...inFlight.values()]);
      const timedOut = await Promise.race([all.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), graceMs).unref())]);
      if (timedOut) {
        for (const msg of inFlight.keys()) {
          handedBack.add(msg);
          msg.nak();
        }
      }
      await done.catch(() => {});
    },
  };
}
