import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { createInbox, type Msg, type MsgHdrs, type Subscription } from '@nats-io/transport-node';
import type { Nats } from './connection.ts';
import { quickManager } from './quick-clients.ts';

/** One stored message of a range, as `readRange` hands it on. */
export interface RangeItem {
  data: Uint8Array;
  seq: number;
  subject: string;
  traceparent?: string | undefined;
  /** Only when asked for (`RangeOptions.headers`). */
  headers?: MsgHdrs | undefined;
}

export interface RangeOptions {
  stream: string;
  startSeq: number;
  /** The last sequence handed on: the stream's last when the read began, for a rebuild; Infinity: follow the stream as it grows. */
  endSeq: number;
  signal: AbortSignal;
  log: (m: string) => void;
  name: string;
  /** Read each message's `traceparent` header (parsing a message's headers costs; off unless someone uses it). */
  traceparents?: boolean;
  /** Hand on each message's headers (`RangeItem.headers`). */
  headers?: boolean | undefined;
  /** The consumer delivers headers alone (`data` empty). */
  headersOnly?: boolean | undefined;
  /** Only the messages on subjects that match this one filter. */
  filter?: string | undefined;
  /** Messages a pull asks for (tests: smaller); what waits to be taken is kept under four pulls' worth. */
  pullMessages?: number;
  /** How long a pull waits at the server (tests: shorter). */
  pullExpiresMs?: number;
}

/** Messages one pull asks for, and their bytes at most (above EVENTS' largest message, which a pull must always fit). */
const PULL_MESSAGES = 5_000;
const PULL_BYTES = 16 * 1024 * 1024;
/** Not yet handed on: no pull is sent while this much waits (the reader is slower than the log). */
const QUEUED_PULLS = 4;
const QUEUED_BYTES = 64 * 1024 * 1024;
/** A pull waits this long for messages; the server says it is alive every heartbeat meanwhile. */
const EXPIRES_MS = 5_000;
const HEARTBEAT_MS = 1_000;
/**
 * A pull still in flight this long after its expiry was dropped by the server without a
 * word: nats-server 2.9 (before 2.9.16) removes a pull that expired when a message comes
 * for it before its own timer has answered 408, so neither a 408 nor a heartbeat nor the
 * message follows. Sent again on the same consumer; a late 408 of the old one is told
 * apart by its reply subject.
 */
const LAPSE_GRACE_MS = 100;
/**
 * A pull with no message nor status for this many heartbeats: the consumer is lost (a
 * node died; a reconnect lost the pull in flight); read again from a new one.
 */
const MISSED_BEATS = 3;
/** An unused consumer (the reader died without deleting it) is removed by the server after this. */
const INACTIVE_MS = 60_000;
const RETRY_MAX_MS = 1_000;
const ns = (ms: number) => ms * 1_000_000;

/** One consumer of a range read, with its own inbox; a new one replaces it whole. */
interface Reading {
  name: string;
  sub: Subscription;
  /** The subscription's prefix: each pull's reply is `<inbox>.<its number>`, so a status names its pull. */
  inbox: string;
  pulls: number;
  /** The last consumer sequence received. */
  cseq: number;
  /** The pull in flight: the messages it still owes, its reply subject, and the timer that sends another once it lapsed. */
  pull?: { left: number; reply: string; lapse: NodeJS.Timeout } | undefined;
  /** Heartbeats passed without a word from the server while a pull is in flight. */
  beats: number;
}

/** The pull in flight is over (answered, expired, or lapsed): its lapse timer goes with it. */
function endPull(c: Reading): void {
  if (c.pull) clearTimeout(c.pull.lapse);
  c.pull = undefined;
}

/**
 * The parts of a JetStream delivery's reply subject a range read needs:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>`,
 * or, from servers that add a domain and an account, two tokens more after `ACK`
 * and one at the end. Undefined for anything else (a status message).
 */
export function deliveryOf(reply: string): { seq: number; cseq: number; pending: number } | undefined {
  if (!reply.startsWith('$JS.ACK.')) return undefined;
  const t = reply.split('.');
  const at = t.length === 9 ? 4 : t.length >= 11 ? 6 : -1;
  if (at < 0) return undefined;
  const seq = Number(t[at + 1]);
  const cseq = Number(t[at + 2]);
  const pending = Number(t[at + 4]);
  return Number.isSafeInteger(seq) && Number.isSafeInteger(cseq) && Number.isSafeInteger(pending) ? { seq, cseq, pending } : undefined;
}

/**
 * A stream's messages from `startSeq` through `endSeq`, in order, in batches of what has
 * arrived, each message once; ends after `endSeq`, or as soon as the stream holds
 * nothing more (the range's last messages were deleted), or when `signal` aborts. With
 * `endSeq` Infinity it follows the stream: a pull always waits at the server for what
 * comes next, and one that expires is sent again at once.
 *
 * For reading a stored range once (a rebuild, a replay): cheaper per message than an
 * ordered consumer through nats.js's JetStream client. An ephemeral consumer without
 * acks is pulled from a plain subscription in large pulls; a message's sequence, its
 * consumer sequence and what is pending after it come from its reply subject, its
 * headers are parsed only when asked for. Its consumer sequences must follow each other
 * (a gap: something was lost on the way); a gap, a lost consumer or a pull the server
 * stops answering (no heartbeat) makes a new consumer from the next sequence not yet
 * received, so nothing is skipped or handed on twice. Pulls stop while what was
 * received waits to be taken.
 */
export async function* readRange(nats: Nats, opts: RangeOptions): AsyncGenerator<RangeItem[]> {
  let next = Math.max(1, opts.startSeq);
  if (next > opts.endSeq) return;
  const following = opts.endSeq === Infinity;
  const pullMessages = opts.pullMessages ?? PULL_MESSAGES;
  const pullExpiresMs = opts.pullExpiresMs ?? EXPIRES_MS;
  let queue: RangeItem[] = [];
  let queuedBytes = 0;
  let done = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  opts.signal.addEventListener('abort', notify, { once: true });

  /** The consumer read now; replaced whole when anything goes wrong. */
  let current: Reading | undefined;
  let failures = 0;
  let restarting: Promise<void> | undefined;

  const drop = () => {
    const c = current;
    current = undefined;
    if (!c) return;
    endPull(c);
    c.sub.unsubscribe();
    void quickManager(nats).then((jsm) => jsm.consumers.delete(opts.stream, c.name)).catch(() => {});
  };
  const finish = () => {
    done = true;
    drop();
    notify();
  };
  const restart = (why: string) => {
    drop();
    if (done || opts.signal.aborted || restarting) return;
    opts.log(`${opts.name}: ${why}; reading again from seq ${next}`);
    restarting = open().finally(() => (restarting = undefined));
  };

  const pull = () => {
    const c = current;
    if (!c || c.pull || done) return;
    const room = Math.min(pullMessages, QUEUED_PULLS * pullMessages - queue.length);
    if (room < pullMessages / 2 || queuedBytes > QUEUED_BYTES - PULL_BYTES) return;
    const reply = `${c.inbox}.${++c.pulls}`;
    const lapse = setTimeout(() => {
      if (c !== current || c.pull?.reply !== reply) return;
      endPull(c);
      pull();
    }, pullExpiresMs + LAPSE_GRACE_MS);
    c.pull = { left: room, reply, lapse };
    c.beats = 0;
    nats.nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${opts.stream}.${c.name}`, JSON.stringify({ batch: room, max_bytes: PULL_BYTES, expires: ns(pullExpiresMs), idle_heartbeat: ns(Math.min(HEARTBEAT_MS, pullExpiresMs / 2)) }), { reply });
  };

  const receive = (c: Reading, m: Msg) => {
    if (c !== current) return;
    c.beats = 0;
    const d = deliveryOf(m.reply ?? '');
    if (!d) {
      // A status, on its pull's reply subject: 100 is a heartbeat, anything else ends the
      // pull (expired, size reached) or the consumer. One of a pull sent again is late.
      if (m.subject !== c.pull?.reply) return;
      const code = m.headers?.code ?? 0;
      if (code === 100) return;
      if (code === 408 || code === 404 || (code === 409 && /exceeds maxbytes/i.test(m.headers?.description ?? ''))) {
        endPull(c);
        return pull();
      }
      return restart(`its consumer answered ${code} ${m.headers?.description ?? ''}`.trim());
    }
    if (d.cseq !== c.cseq + 1) return restart(`a gap in its consumer's deliveries (${c.cseq} then ${d.cseq})`);
    c.cseq = d.cseq;
    if (c.pull && --c.pull.left === 0) endPull(c);
    if (d.seq >= next && d.seq <= opts.endSeq) {
      const data = m.data;
      queue.push({ data, seq: d.seq, subject: m.subject, traceparent: opts.traceparents ? m.headers?.get('traceparent') || undefined : undefined, ...(opts.headers ? { headers: m.headers } : {}) });
      queuedBytes += data.byteLength;
      next = d.seq + 1;
      if (queue.length === 1) notify();
    }
    // A range ends at its last sequence, or where the stream holds nothing more; a follow never ends.
    if (d.seq >= opts.endSeq || (d.pending === 0 && !following)) return finish();
    pull();
  };

  const open = async (): Promise<void> => {
    while (!done && !opts.signal.aborted) {
      try {
        const jsm = await quickManager(nats);
        const ci = await jsm.consumers.add(opts.stream, {
          ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: next,
          mem_storage: true, num_replicas: 1, inactive_threshold: ns(INACTIVE_MS), ...(opts.filter ? { filter_subject: opts.filter } : {}), ...(opts.headersOnly ? { headers_only: true } : {}),
        });
        const c: Reading = { name: ci.name, sub: undefined as unknown as Subscription, inbox: createInbox(), pulls: 0, cseq: 0, beats: 0 };
        c.sub = nats.nc.subscribe(`${c.inbox}.*`, { callback: (err, m) => (err ? undefined : receive(c, m)) });
        if (failures) opts.log(`${opts.name}: reading again from seq ${next}`);
        failures = 0;
        current = c;
        // Nothing stored from here on: the rest of the range was deleted.
        if (ci.num_pending === 0 && !following) return finish();
        if (done || opts.signal.aborted) return drop();
        return pull();
      } catch (err) {
        if (opts.signal.aborted) return;
        failures++;
        if (failures === 1 || failures % 10 === 0) opts.log(`${opts.name}: cannot start reading (${(err as Error).message}); trying again`);
        await new Promise((r) => setTimeout(r, Math.min(250 * failures, RETRY_MAX_MS)));
      }
    }
  };

  const watchdog = setInterval(() => {
    const c = current;
    if (!c?.pull) return;
    if (++c.beats >= MISSED_BEATS) restart(`its consumer stopped answering (${MISSED_BEATS} heartbeats missed)`);
  }, HEARTBEAT_MS);

  try {
    restarting = open().finally(() => (restarting = undefined));
    while (!opts.signal.aborted) {
      if (queue.length) {
        const batch = queue;
        queue = [];
        queuedBytes = 0;
        pull();
        yield batch;
        continue;
      }
      if (done) return;
      await new Promise<void>((r) => (wake = r));
    }
  } finally {
    clearInterval(watchdog);
    opts.signal.removeEventListener('abort', notify);
    done = true;
    drop();
    await restarting;
    drop();
  }
}
