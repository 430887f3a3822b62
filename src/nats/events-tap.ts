import { STREAMS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';
import { followBatches, followOrdered } from './follow.ts';

/** One message of EVENTS as the tap hands it to every reader of the process. */
export interface TapItem {
  data: Uint8Array;
  seq: number;
  subject: string;
  /** The decoded event, shared by the readers of this item (they must not change it). */
  decoded?: unknown;
  /** W3C trace context of the writer, from the message's headers (tracing on). */
  traceparent?: string | undefined;
}

/** Recent items kept (at least this many, at most twice), so a reader that starts or catches up a little behind joins without a read of its own. */
const RING_SIZE = 10_000;
/**
 * And at most about this much of the messages' memory (twice it before a trim): a commit
 * can hold a thousand events, so a count alone could keep gigabytes. Counted by the
 * buffers the messages' bytes live in (the client reads many messages into one).
 */
const RING_BYTES = 32 * 1024 * 1024;
/** A reader this far behind the tap reads on its own until it catches up; the others go on. */
const LAG_LIMIT = 10_000;
/** Messages one pull of the tap asks for (the range reader's own default). */
const PULL_BATCH = 5_000;

interface Reader {
  /** The next sequence this reader needs. */
  next: number;
  queue: TapItem[];
  shared: boolean;
  wake?: () => void;
}

interface Tap {
  readers: Set<Reader>;
  ringSize: number;
  ringBytes: number;
  /** Memory of the ring's items, counted once per buffer they share. */
  held: number;
  lastBuffer?: ArrayBufferLike;
  lagLimit: number;
  ring: TapItem[];
  /** The next sequence the tap's own read will deliver. */
  next: number;
  reading?: AbortController;
  /** Resolves the tap's wait while every shared reader is full. */
  room?: () => void;
  log: (m: string) => void;
}

const taps = new WeakMap<Nats, Tap>();

/**
 * Commits this process is writing, by subject (a partition owner's: one at a time on
 * its subject). When the tap reads one back, byte for byte what was written, its
 * readers get the events as they were written instead of decoding them again: the
 * owner's results are most of what the worker process reads, and each was just encoded.
 */
interface Written {
  data: Buffer;
  events: readonly unknown[];
}
const writing = new WeakMap<Nats, Map<string, Written>>();

/** The commit `data` about to be published on `subject`, holding `events` (which no one changes after). */
export function writingCommit(nats: Nats, subject: string, data: Buffer, events: readonly unknown[]): void {
  let bySubject = writing.get(nats);
  if (!bySubject) writing.set(nats, (bySubject = new Map()));
  bySubject.set(subject, { data, events });
}

/** Whatever `subject`'s writer had on its way is no longer expected (its log closed). */
export function forgetWriting(nats: Nats, subject: string): void {
  writing.get(nats)?.delete(subject);
}

/** The events of `data` on `subject` when this process wrote exactly these bytes there. */
function writtenEvents(nats: Nats, subject: string, data: Uint8Array): readonly unknown[] | undefined {
  const bySubject = writing.get(nats);
  const w = bySubject?.get(subject);
  if (!w || !w.data.equals(data)) return undefined;
  bySubject!.delete(subject);
  return w.events;
}

/** Smaller bounds for tests (before the connection's first reader starts). */
export function tuneEventsTap(nats: Nats, bounds: { ringSize: number; lagLimit: number; ringBytes?: number }): void {
  taps.set(nats, { readers: new Set(), ring: [], next: 0, log: () => {}, held: 0, ringBytes: RING_BYTES, ...bounds });
}

/** The items the tap keeps for readers that join, and the memory they hold (tests). */
export function eventsTapRing(nats: Nats): { items: number; bytes: number } {
  const tap = taps.get(nats);
  return { items: tap?.ring.length ?? 0, bytes: tap?.held ?? 0 };
}

/** Readers of the connection's tap now (tests: a reader that stopped has left). */
export function eventsTapReaders(nats: Nats): number {
  return taps.get(nats)?.readers.size ?? 0;
}

/**
 * EVENTS in order from `startSeq`, read once per process however many readers there
 * are (projector, notifier reader, task partition owners, live feeds). Each would otherwise hold its own
 * ordered consumer, so every event crossed the socket and was decoded once per reader.
 *
 * The readers stay independent. One that falls LAG_LIMIT behind (Postgres down under
 * the projector) leaves the shared read and follows EVENTS with a consumer of its own,
 * so the others do not wait for it; it joins again once the tap's recent items cover
 * where it is. Only when every shared reader is full does the tap wait. A reader that
 * starts outside the recent items (a projector far behind, an owner taking over from
 * an older `from`) also starts on its own. Ends when `signal` aborts.
 */
export async function* followEvents(nats: Nats, opts: FollowEventsOptions): AsyncGenerator<TapItem> {
  for await (const batch of followEventBatches(nats, opts)) yield* batch;
}

interface FollowEventsOptions {
  startSeq: number;
  signal: AbortSignal;
  log: (m: string) => void;
  name: string;
  maxMessages: number;
}

/** A shared reader takes what the tap queued for it in one step, at most this many items. */
const MAX_BATCH = 1_000;

/**
 * `followEvents` in batches: what the tap has queued for the reader comes in one step
 * (one generator hop per batch, not per item), for readers that handle items
 * synchronously and read every message of EVENTS (the partition owners).
 */
export async function* followEventBatches(nats: Nats, opts: FollowEventsOptions): AsyncGenerator<TapItem[]> {
  let tap = taps.get(nats);
  if (!tap) taps.set(nats, (tap = { readers: new Set(), ring: [], next: 0, log: opts.log, ringSize: RING_SIZE, ringBytes: RING_BYTES, held: 0, lagLimit: LAG_LIMIT }));
  const reader: Reader = { next: Math.max(1, opts.startSeq), queue: [], shared: false };
  const wake = () => reader.wake?.();
  opts.signal.addEventListener('abort', wake, { once: true });
  tap.readers.add(reader);
  try {
    join(nats, tap, reader);
    while (!opts.signal.aborted) {
      if (reader.shared || reader.queue.length) {
        if (reader.queue.length) {
          const batch = reader.queue.length <= MAX_BATCH ? reader.queue : reader.queue.slice(0, MAX_BATCH);
          reader.queue = batch === reader.queue ? [] : reader.queue.slice(MAX_BATCH);
          reader.next = batch[batch.length - 1]!.seq + 1;
          if (reader.queue.length <= Math.floor(tap.lagLimit / 2)) tap.room?.();
          yield batch;
          continue;
        }
        await new Promise<void>((r) => (reader.wake = r));
        reader.wake = undefined;
        continue;
      }
      // On its own until the tap's recent items cover where it is.
      const own = new AbortController();
      const stop = () => own.abort();
      opts.signal.addEventListener('abort', stop, { once: true });
      try {
        for await (const m of followOrdered(nats, { stream: STREAMS.events.name, startSeq: reader.next, maxMessages: opts.maxMessages, signal: own.signal, log: opts.log, name: opts.name })) {
          if (m.seq < reader.next) continue;
          reader.next = m.seq + 1;
          yield [m];
          if (join(nats, tap, reader)) break;
        }
      } finally {
        opts.signal.removeEventListener('abort', stop);
        own.abort();
      }
    }
  } finally {
    opts.signal.removeEventListener('abort', wake);
    tap.readers.delete(reader);
    tap.room?.();
    if (tap.readers.size === 0) {
      tap.reading?.abort();
      tap.reading = undefined;
      tap.ring = [];
      tap.held = 0;
    }
  }
}

/**
 * Makes `reader` a shared reader if it can be one: the tap's recent items cover its
 * next sequence (they are queued for it), or no one else shares the tap, which then
 * (re)starts at the reader's position.
 */
function join(nats: Nats, tap: Tap, reader: Reader): boolean {
  if (tap.reading && othersShare(tap, reader)) {
    const first = tap.ring[0]?.seq ?? tap.next;
    if (reader.next < first || reader.next > tap.next) return false;
    reader.queue = tap.ring.filter((i) => i.seq >= reader.next);
    reader.shared = true;
    return true;
  }
  reader.shared = true;
  reader.queue = [];
  start(nats, tap, reader.next);
  return true;
}

function othersShare(tap: Tap, reader: Reader): boolean {
  for (const r of tap.readers) if (r.shared && r !== reader) return true;
  return false;
}

function start(nats: Nats, tap: Tap, from: number): void {
  tap.reading?.abort();
  const reading = new AbortController();
  tap.reading = reading;
  tap.ring = [];
  tap.held = 0;
  tap.next = from;
  void (async () => {
    // Our own pulls (followBatches), not nats.js's consume(), whose stalls on a pull the
    // server dropped left every reader of the process idle 2 s (follow.ts).
    for await (const batch of followBatches(nats, { stream: STREAMS.events.name, startSeq: from, maxMessages: PULL_BATCH, signal: reading.signal, log: tap.log, name: 'events-tap' })) {
      for (const m of batch) {
        if (reading.signal.aborted) return;
        const item: TapItem = { data: m.data, seq: m.seq, subject: m.subject, traceparent: m.traceparent };
        const events = writtenEvents(nats, m.subject, m.data);
        if (events) item.decoded = events;
        tap.next = m.seq + 1;
        // The ring keeps an item of its own, never decoded: the readers' shared decode would
        // otherwise live as long as the ring (thousands of messages, every event whole),
        // long enough to be promoted out of V8's young generation and cost its full
        // collections. A reader that joins from the ring decodes those few again.
        tap.ring.push({ data: item.data, seq: item.seq, subject: item.subject, traceparent: item.traceparent });
        tap.held += memoryOf(tap, item);
        // Trimmed once it holds twice its bounds, not at every item: a splice moves the
        // whole ring, and one per message made a replay of the log quadratic.
        if (tap.ring.length >= 2 * tap.ringSize || tap.held >= 2 * tap.ringBytes) trim(tap);
        let waiting = 0;
        let shared = 0;
        for (const r of tap.readers) {
          if (!r.shared || m.seq < r.next) continue;
          shared++;
          r.queue.push(item);
          r.wake?.();
          if (r.queue.length >= tap.lagLimit) waiting++;
        }
        if (shared > 0 && waiting === shared) {
          // Everyone who shares the read is full: wait for the first to make room.
          await new Promise<void>((r) => (tap.room = r));
          tap.room = undefined;
        } else if (waiting > 0) {
          // Some are full and others are not: the full ones go on by themselves.
          for (const r of tap.readers) {
            if (r.shared && r.queue.length >= tap.lagLimit) {
              r.shared = false;
              r.queue = [];
              r.wake?.();
            }
          }
        }
      }
    }
  })().catch((err: Error) => tap.log(`events-tap: ${err.message}`));
}

/** The memory `data` keeps alive: the buffer the client read it into. */
const bufferBytes = (data: Uint8Array): number => Math.max(data.buffer.byteLength, data.byteLength);

/** What keeping `item` adds: its buffer's size the first time the ring meets that buffer. */
function memoryOf(tap: Tap, item: TapItem): number {
  const buffer = item.data.buffer;
  if (buffer === tap.lastBuffer) return 0;
  tap.lastBuffer = buffer;
  return bufferBytes(item.data);
}

/** Keeps the newest items within both bounds. */
function trim(tap: Tap): void {
  let keep = 0;
  let held = 0;
  let last: ArrayBufferLike | undefined;
  for (let i = tap.ring.length - 1; i >= 0 && keep < tap.ringSize; i--) {
    const data = tap.ring[i]!.data;
    const adds = data.buffer === last ? 0 : bufferBytes(data);
    if (held + adds > tap.ringBytes && keep > 0) break;
    held += adds;
    last = data.buffer;
    keep++;
  }
  tap.ring.splice(0, tap.ring.length - keep);
  tap.held = held;
}
