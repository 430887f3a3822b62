import type { JsMsg } from '@nats-io/jetstream';
import type { Nats } from './connection.ts';
import { followDurable } from './follow.ts';
import type { Supervisor } from './supervisor.ts';

/** Well inside the work queues' 15 s ack wait (streams/definitions.ts). */
const WORKING_EVERY_MS = 5_000;

export interface WorkConsumer {
  /** Stops taking work; in-flight items get `graceMs` to finish, then go back to the stream. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * The one shape of a work-queue consumer: pull from a durable consumer with at most
 * `concurrency` items in flight; `handle` acks or naks each item itself, unless
 * `handedBack()` says a stop has already returned it to the stream.
 *
 * A `handle` that throws (a job that does not decode, a result that cannot be
 * recorded) leaves the decision to the supervisor: the job goes back to the stream
 * after a pause, and once it has failed the same non-transient way POISON_AFTER
 * times it is recorded in the failure ledger with its content and terminated, so a
 * poison job is not redelivered forever. The ledger's retry republishes it.
 */
export function consumeWork(opts: {
  nats: Nats;
  stream: string;
  durable: string;
  concurrency: number;
  supervisor: Supervisor;
  log: (m: string) => void;
  handle: (msg: JsMsg, handedBack: () => boolean) => Promise<void>;
}): WorkConsumer {
  const { supervisor } = opts;
  const progress = supervisor.progress(opts.durable, opts.stream);
  progress.started(0);
  const failed = async (msg: JsMsg, err: unknown) => {
    if (handedBack.has(msg)) return;
    const item = { stream: opts.stream, seq: msg.seq, subject: msg.subject, payload: msg.data };
    const verdict = await supervisor.failed(opts.durable, item, err, Math.max(1, msg.info.deliveryCount));
    if (handedBack.has(msg)) return;
    // No reason text: nats-server 2.9 ignores a `+TERM` that carries one.
    if (verdict.skip) msg.term();
    else msg.nak(verdict.waitMs);
  };
  const stopServingRetries = supervisor.ledger.serveRetries(opts.durable, async (record) => {
    if (!record.payload) throw new Error('the failure record holds no message to republish');
    await opts.nats.publish(record.subject, Buffer.from(record.payload, 'base64'), { msgId: `${opts.durable}:${record.seq}:retry:${record.retries ?? 0}` });
  }, opts.log);
  let slotFree: (() => void) | undefined;
  let stopping = false;
  // One timer for every item in flight, not one per item: a long call keeps its
  // message (the consumers' ack wait is 15 s) without a timer set and cleared per job.
  const keepAlive = setInterval(() => {
    for (const msg of inFlight.keys()) if (!handedBack.has(msg)) msg.working();
  }, WORKING_EVERY_MS);
  keepAlive.unref();
  const pulling = new AbortController();
  const stopPulling = () => pulling.abort();
  const inFlight = new Map<JsMsg, Promise<void>>();
  const handedBack = new Set<JsMsg>();

  const done = (async () => {
    // Pulls again whenever the consumer's leader changes (follow.ts); ends on stop.
    const messages = followDurable(opts.nats, {
      stream: opts.stream, durable: opts.durable, maxMessages: Math.min(opts.concurrency, 1000),
      signal: pulling.signal, log: opts.log, name: opts.durable,
    });
    for await (const msg of messages) {
      if (stopping) {
        msg.nak();
        continue;
      }
      const p = opts.handle(msg, () => handedBack.has(msg)).then(
        () => progress.advanced(msg.seq),
        (err: unknown) => failed(msg, err),
      ).catch(() => {}).finally(() => {
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
      clearInterval(keepAlive);
      stopServingRetries();
      progress.stopped();
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
