import { STREAMS } from '../../streams/definitions.ts';
import { eventsOf } from '../commands/commit.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { decodeJson } from '../lib/json.ts';
import { isTransient } from '../lib/transient.ts';
import type { Nats } from './connection.ts';
import { followEventBatches } from './events-tap.ts';
import { readRange } from './range-reader.ts';
import { followBatches } from './follow.ts';
import { POISON_AFTER, type FailedEvent, type Supervisor, type Verdict } from './supervisor.ts';

export interface EventReaderOptions<T = unknown> {
  /** First stream sequence to deliver. */
  startSeq: number;
  maxBatch: number;
  signal: AbortSignal;
  log: (msg: string) => void;
  /** The consumer's name: in logs, failure records (`jetcron projections failures`) and /healthz. */
  name: string;
  supervisor: Supervisor;
  /**
   * Called once an item has been recorded as failed and is skipped, so the consumer
   * can move its position past it (otherwise the next handled batch does).
   */
  onSkip?: (item: StreamItem<unknown>) => Promise<void>;
  /**
   * How a skipped item is run again on `jetcron projections retry`; default: the
   * handler with a batch of that one item. `index`: the record is of that one event of
   * the item (a commit's), not the whole item. Only the process reading runs retries.
   */
  reapply?: (item: StreamItem<never>, index: number | undefined) => Promise<void>;
  /**
   * A message of several events (a commit) that has failed alone POISON_AFTER times:
   * apply its events one at a time, each one that fails recorded through `skip` (which
   * rejects when the record cannot be written) and left out, the others applied, and
   * the position moved past the message. False: the item cannot be taken apart (one
   * event), so it is recorded and skipped whole, as any item. Without it, every item is.
   */
  applyApart?: (item: StreamItem<T>, skip: (event: FailedEvent, err: unknown) => Promise<void>) => Promise<boolean>;
  /** false: the caller reports its own progress (a keyed reader finishes items later than it takes them). */
  trackProgress?: boolean;
  /**
   * Read a stored range once, from `startSeq` through this sequence (`readRange`, cheaper
   * than following the log), and end there: the read then resolves true once every
   * message through it was handled or skipped (the range's deleted ones need neither).
   */
  through?: number;
  /** With `through`: hand on each message's `traceparent` header (parsing headers costs; the tap always does). */
  traceparents?: boolean;
  /**
   * What an item weighs against `maxBatch` (default one): a commit's events, so a batch
   * of a log of commits holds as many events as one of single events would.
   */
  weigh?: (decoded: T) => number;
}

/** One stored message as a reader hands it on: its decoded content, sequence and subject. */
export interface StreamItem<T> {
  event: T;
  seq: number;
  subject: string;
  /** The writer's W3C trace context (message header), when tracing was on where it was written. */
  traceparent?: string | undefined;
}

/** A message's headers, as nats.js hands them (a message's `headers`, `StoredMsg.header`). */
export interface MessageHeaders {
  get(name: string): string;
}

interface RawItem {
  data: Uint8Array;
  /** Its headers (a stream of one reader: the shared EVENTS tap keeps none). */
  headers?: MessageHeaders | undefined;
  seq: number;
  subject: string;
  /** Decoded once, by whichever reader of the process got to it first (events-tap.ts). */
  decoded?: unknown;
  traceparent?: string | undefined;
}

/**
 * The events of one EVENTS message: a commit's list, or the one event. Every reader of
 * the tap decodes with this, since the decoded value is shared between them.
 */
export function decodeEvents(data: Uint8Array): JetcronEvent[] {
  return eventsOf<JetcronEvent>(decodeJson<unknown>(data));
}

/** Each event of each message, in order, with its message's sequence and its place in it. */
function flatten(batch: StreamItem<JetcronEvent[]>[]): StoredEvent<JetcronEvent>[] {
  const out: StoredEvent<JetcronEvent>[] = [];
  for (const item of batch) {
    item.event.forEach((event, index) => out.push({ event, seq: item.seq, subject: item.subject, index, traceparent: event.traceparent ?? item.traceparent }));
  }
  return out;
}

/** What a failure record says of one event of a commit. */
export const failedEventOf = (e: { index?: number; event: { id: string; type: string } }): FailedEvent => ({ index: e.index ?? 0, id: e.event.id, type: e.event.type });

/**
 * Reads EVENTS: see `readStream`. The handler gets events, not messages: a commit's
 * events arrive together, in one batch, with the same `seq`. A retry of a record of
 * one event of a commit (`index`) hands on that event alone.
 */
export function readEvents(
  nats: Nats,
  opts: Omit<EventReaderOptions, 'reapply' | 'applyApart' | 'weigh'> & {
    /** `maxBatch` counts events, not messages (a commit weighs its events): a projector's transaction. */
    countEvents?: boolean;
    reapply?: (batch: StoredEvent<JetcronEvent>[]) => Promise<void>;
    /** See `EventReaderOptions.applyApart`: called only for a message of several events. */
    applyApart?: (events: StoredEvent<JetcronEvent>[], skip: (event: StoredEvent<JetcronEvent>, err: unknown) => Promise<void>) => Promise<void>;
  },
  handle: (batch: StoredEvent<JetcronEvent>[]) => Promise<void>,
): Promise<boolean> {
  const { applyApart } = opts;
  const reapply = opts.reapply ?? handle;
  return readStream<JetcronEvent[]>(
    nats,
    {
      ...opts,
      stream: STREAMS.events.name,
      decode: decodeEvents,
      shared: true,
      weigh: opts.countEvents ? (events) => events.length : undefined,
      reapply: (item, index) => {
        const events = flatten([item as StreamItem<JetcronEvent[]>]);
        if (index === undefined) return reapply(events);
        const one = events.filter((e) => e.index === index);
        if (!one.length) throw new Error(`seq ${item.seq} has no event #${index}`);
        return reapply(one);
      },
      applyApart: applyApart && (async (item, skip) => {
        const events = flatten([item]);
        if (events.length < 2) return false;
        await applyApart(events, (e, err) => skip(failedEventOf(e), err));
        return true;
      }),
    },
    (batch) => handle(flatten(batch)),
  );
}

/** Received and not yet handled, at most (besides `maxBatch` four times over). */
const BUFFER_BYTES = 64 * 1024 * 1024;

/** The item's events could not all be recorded: nothing of it may be skipped yet. */
class NotRecorded extends Error {
  readonly waitMs: number;

  constructor(waitMs: number) {
    super('a failure record could not be written');
    this.waitMs = waitMs;
  }
}

/**
 * The one loop every log reader (projector, notifier, inbound router,
 * replay projections) runs on: reads a stream in order with an ordered consumer and
 * hands the handler batches of whatever has arrived, up to maxBatch.
 *
 * A failing batch is never skipped whole. A transient failure (a store down) retries
 * the batch forever with backoff. Any other failure splits the batch into single
 * items to find the one at fault; that item is retried, and once it has failed
 * POISON_AFTER times it is recorded in the failure ledger, logged as an error and
 * skipped, so one poison event cannot stop the consumer. A reader that can apply a
 * message's events apart (`applyApart`: the projector) takes a poison commit apart
 * instead: only its events at fault are recorded (by sequence and index) and skipped.
 * An item that does not even decode is recorded and skipped at once.
 */
export async function readStream<T>(
  nats: Nats,
  opts: EventReaderOptions<T> & {
    stream: string;
    decode: (data: Uint8Array, headers: MessageHeaders | undefined) => T;
    shared?: boolean;
    /** Deliver each message's headers alone (no payload: `data` is empty), a reader that needs the payloads of few. */
    headersOnly?: boolean;
    /** Only the messages on subjects that match (one subject filter: nats-server 2.9 takes one). */
    filter?: string;
  },
  handle: (batch: StreamItem<T>[]) => Promise<void>,
): Promise<boolean> {
  const { supervisor } = opts;
  const progress = supervisor.progress(opts.name, opts.stream);
  const tracking = opts.trackProgress !== false;
  // Ends only when reading stops: a lost consumer is replaced underneath (follow.ts).
  const reading = new AbortController();
  const follow = { stream: opts.stream, startSeq: opts.startSeq, maxMessages: Math.max(100, opts.maxBatch), signal: reading.signal, log: opts.log, name: opts.name, headersOnly: opts.headersOnly, filter: opts.filter };
  // A range is read on its own; else EVENTS is read once per process for all its readers, other streams have one reader each.
  const batches: AsyncIterable<RawItem[]> = opts.through !== undefined
    ? readRange(nats, { ...follow, endSeq: opts.through, traceparents: opts.traceparents })
    : opts.shared ? followEventBatches(nats, follow) : followBatches(nats, { ...follow, headers: true });
  const buffer: RawItem[] = [];
  /** The bytes of the messages in `buffer`: commits can hold hundreds of events each, so a count alone bounds nothing. */
  let bufferedBytes = 0;
  /** The range (`through`) has been read to its end: once the buffer is empty, so is the work. */
  let ended = false;
  let wake: (() => void) | undefined;
  let drained: (() => void) | undefined;
  const onAbort = () => {
    reading.abort();
    wake?.();
    drained?.();
  };
  opts.signal.addEventListener('abort', onAbort, { once: true });
  if (opts.signal.aborted) onAbort();
  if (tracking) progress.started(opts.startSeq - 1);

  const reapplyRecord = async (record: { seq: number; index?: number }) => {
    const stored = await nats.jsm.streams.getMessage(opts.stream, { seq: record.seq });
    if (!stored) throw new Error(`seq ${record.seq} is no longer in ${opts.stream}`);
    const item = { event: opts.decode(opts.headersOnly ? new Uint8Array(0) : stored.data, stored.header), seq: stored.seq, subject: stored.subject };
    await (opts.reapply ? opts.reapply(item as StreamItem<never>, record.index) : handle([item]));
  };
  const stopServingRetries = supervisor.ledger.serveRetries(opts.name, reapplyRecord, opts.log);

  const pump = (async () => {
    for await (const items of batches) {
      // Stopped: what the closed iterator still yields is not needed, and waiting for
      // room after the abort would wait forever (nothing drains the buffer any more).
      if (reading.signal.aborted) break;
      for (const m of items) {
        buffer.push(m);
        bufferedBytes += m.data.byteLength;
      }
      wake?.();
      if ((buffer.length >= opts.maxBatch * 4 || bufferedBytes >= BUFFER_BYTES) && !reading.signal.aborted) await new Promise<void>((r) => (drained = r));
    }
    ended = opts.through !== undefined && !reading.signal.aborted;
    wake?.();
  })();

  const taken = (n: number) => {
    const last = buffer[n - 1]!.seq;
    for (let i = 0; i < n; i++) bufferedBytes -= buffer[i]!.data.byteLength;
    buffer.splice(0, n);
    if (tracking) progress.advanced(last);
    if (buffer.length < opts.maxBatch && bufferedBytes < BUFFER_BYTES / 2) {
      drained?.();
      drained = undefined;
    }
  };
  // After a failed try of the head: wait and try again, or move past it once recorded.
  const settleHead = async (verdict: Verdict) => {
    if (!verdict.skip) return new Promise((r) => setTimeout(r, verdict.waitMs));
    const head = buffer[0]!;
    await opts.onSkip?.({ event: undefined, seq: head.seq, subject: head.subject }).catch((err: Error) =>
      opts.log(`${opts.name}: moving past skipped seq ${head.seq} failed: ${err.message}`));
    taken(1);
  };

  // One event of the head, failed on its own while the head is applied apart: recorded, or the whole try is undone.
  const recordEvent = (head: StreamItem<T>, tries: number) => async (event: FailedEvent, err: unknown) => {
    const verdict = await supervisor.failed(opts.name, { stream: opts.stream, seq: head.seq, subject: head.subject, event }, err, tries);
    if (!verdict.skip) throw new NotRecorded(verdict.waitMs);
  };

  // Batches of one while looking for the item at fault in a batch that failed.
  let isolateThrough = 0;
  let tries = 0;
  let completed = false;
  try {
    while (!opts.signal.aborted) {
      if (!buffer.length) {
        if ((completed = ended)) break;
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      const size = buffer[0]!.seq <= isolateThrough ? 1 : opts.maxBatch;
      const batch: StreamItem<T>[] = [];
      let undecodable: unknown;
      // Up to `size` by weight, and at least the head, however much it weighs.
      for (let i = 0, weight = 0; i < buffer.length && weight < size; i++) {
        const raw = buffer[i]!;
        try {
          raw.decoded ??= opts.decode(raw.data, raw.headers);
          batch.push({ event: raw.decoded as T, seq: raw.seq, subject: raw.subject, traceparent: raw.traceparent });
          weight += opts.weigh ? opts.weigh(raw.decoded as T) : 1;
        } catch (err) {
          undecodable = err;
          break;
        }
      }
      if (batch.length === 0) {
        // The head does not decode: no try will ever do better.
        const head = buffer[0]!;
        await settleHead(await supervisor.failed(opts.name, { stream: opts.stream, seq: head.seq, subject: head.subject, payload: head.data }, undecodable, POISON_AFTER));
        continue;
      }
      try {
        await handle(batch);
        taken(batch.length);
        tries = 0;
      } catch (err) {
        if (opts.signal.aborted) break;
        if (batch.length > 1 && !isTransient(err)) {
          opts.log(`${opts.name}: batch of seq ${batch[0]!.seq}-${batch[batch.length - 1]!.seq} failed (${(err as Error).message}); retrying it one event at a time`);
          isolateThrough = batch[batch.length - 1]!.seq;
          tries = 0;
          continue;
        }
        tries++;
        const head = batch[0]!;
        let failure = err;
        if (opts.applyApart && tries >= POISON_AFTER && !isTransient(err)) {
          // Poison inside a message of several events: only the events at fault are skipped.
          try {
            if (await opts.applyApart(head, recordEvent(head, tries))) {
              taken(1);
              tries = 0;
              continue;
            }
          } catch (apartErr) {
            if (opts.signal.aborted) break;
            if (apartErr instanceof NotRecorded) {
              await settleHead({ skip: false, waitMs: apartErr.waitMs });
              continue;
            }
            // Transient: tried again (whole, then apart). Anything else: the message is recorded whole.
            failure = apartErr;
          }
        }
        const verdict = await supervisor.failed(opts.name, { stream: opts.stream, seq: head.seq, subject: head.subject }, failure, tries);
        if (verdict.skip) tries = 0;
        await settleHead(verdict);
      }
    }
  } finally {
    stopServingRetries();
    if (tracking) progress.stopped();
    opts.signal.removeEventListener('abort', onAbort);
    reading.abort();
    drained?.();
    await pump.catch(() => {});
  }
  return completed;
}
