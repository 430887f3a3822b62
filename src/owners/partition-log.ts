import { SYSTEM_ORG, type PartitionEvent } from '../commands/partition/types.ts';
import type { Envelope } from '../commands/envelope.ts';
import type { EventStore } from '../commands/store.ts';
import type { Nats } from '../nats/connection.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { decodeJson } from '../lib/json.ts';
import { eventJson } from '../commands/upcast.ts';
import { forgetWriting, writingCommit } from '../nats/events-tap.ts';
import { trace } from '@opentelemetry/api';
import { currentTraceparent, inSpan, SpanKind } from '../telemetry/tracing.ts';

/** Another owner claimed the partition: this one must stop at once, with nothing more written. */
export class Fenced extends Error {
  constructor(partition: number) {
    super(`partition ${partition}: another owner has claimed it; this owner is fenced`);
    this.name = 'Fenced';
  }
}

/** A commit stays well under EVENTS' 4 MiB message limit; more waits for the next commit. */
const MAX_COMMIT_BYTES = 1024 * 1024;
/** A claim that lost to another write is decided again after this. */
const CLAIM_RETRY_MS = 50;
/** A publish whose outcome is unknown (timeout, election) is tried again, the same message, after this. */
const RETRY_MS = 250;

export interface PartitionLog {
  readonly partition: number;
  /** The sequence of this owner's claim. */
  readonly claimSeq: number;
  /** The sequence of the subject's last message before the claim (0: the partition had never been claimed). */
  readonly afterSeq: number;
  /**
   * Where the owner reads EVENTS from to hold everything the partition has not settled:
   * the lowest position the last owner's last commit (or claim) named.
   */
  readonly resumeFrom: number;
  /** The sequence of this owner's last stored message on the partition's subject. */
  readonly tail: number;
  readonly fenced: boolean;
  /**
   * Appends events to the partition's log. Events appended while a commit is on its way
   * go together in the next one (group commit), in order. Resolves with the sequence of
   * the commit that holds them once it is stored; rejects with `Fenced` once another
   * owner's claim is on the subject (then everything after it rejects too).
   * `withinMs`: nobody waits for these events' answer (a going down a deadline decided, a
   * restatement): they may wait so long for a commit that others' events make anyway
   * (a turn's pings), instead of one of their own at the end of the turn; a stored
   * message costs every reader far more than an event in one.
   */
  append(events: Envelope[], withinMs?: number): Promise<number>;
  /**
   * What each commit says a takeover must read from (the owner's lowest unsettled
   * position); read when the commit is written, so it covers what the commit settles.
   */
  resumeFromNow: () => number;
  /** Stops: what waits is rejected. */
  close(): void;
}

interface Pending {
  /** The events as stored (with the appender's trace context), and their JSON texts. */
  events: Envelope[];
  texts: string[];
  bytes: number;
  resolve: (seq: number) => void;
  reject: (err: Error) => void;
}

/**
 * Claims `partition` for `owner` and returns its log. The claim is appended only when
 * the subject's last sequence is still the one read, so of two processes claiming at
 * once one wins; a message the previous owner stored before the claim stays valid and
 * the claim is decided again after it. The caller holds the partition's lease; the
 * claim is what makes a lease that was lost without its holder knowing (frozen, cut
 * off) harmless: every later commit of the old owner is refused.
 */
export async function claimPartition(
  deps: { nats: Nats; store: EventStore },
  opts: { partition: number; owner: string; signal?: AbortSignal; subject?: string },
): Promise<PartitionLog> {
  const subject = opts.subject ?? SUBJECTS.partition(opts.partition);
  for (;;) {
    if (opts.signal?.aborted) throw new Error(`partition ${opts.partition}: claim abandoned`);
    const last = await deps.nats.jsm.direct.getMessage(STREAMS.events.name, { last_by_subj: subject });
    const afterSeq = last?.seq ?? 0;
    const resumeFrom = last ? resumePoint(decodeJson<unknown>(last.data)) : 1;
    const claim: PartitionEvent = {
      type: 'PartitionClaimed',
      // Another kind of partition (monitors) names its subject: one owner's first claims of both kinds must not share an id (`Nats-Msg-Id`).
      id: opts.subject ? `claim.${subject}.${afterSeq}.${opts.owner}` : `claim.${opts.partition}.${afterSeq}.${opts.owner}`,
      at: new Date().toISOString(),
      org_id: SYSTEM_ORG,
      data: { partition: opts.partition, owner: opts.owner, after_seq: afterSeq, resume_from: resumeFrom },
    };
    try {
      const seq = await deps.store.append(subject, claim, afterSeq);
      return openLog(deps.nats, opts.partition, subject, seq, afterSeq, resumeFrom, opts.signal);
    } catch (err) {
      // Someone wrote in between (the old owner's last commits while it winds down, or a
      // rival's claim): decide again, after a pause so a busy old owner is not raced in a tight loop.
      if ((err as Error).name !== 'ConcurrencyError') throw err;
      await new Promise((r) => setTimeout(r, CLAIM_RETRY_MS));
    }
  }
}

/** What a partition's last message says a takeover reads from: a commit's `from`, a claim's `resume_from`. */
function resumePoint(message: unknown): number {
  const m = message as { type?: string; from?: unknown; data?: { resume_from?: unknown } };
  const at = m.type === 'Commit' ? m.from : m.type === 'PartitionClaimed' ? m.data?.resume_from : undefined;
  return typeof at === 'number' && at >= 1 ? at : 1;
}

function openLog(nats: Nats, partition: number, subject: string, claimSeq: number, afterSeq: number, resumeFrom: number, signal?: AbortSignal): PartitionLog {
  let tail = claimSeq;
  let fenced = false;
  let closed = false;
  let counter = 0;
  let queue: Pending[] = [];
  let writing = false;
  /** A flush asked for at the end of this turn; one asked for later (`withinMs`). */
  let immediate = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const run = () => {
    immediate = false;
    if (timer) clearTimeout(timer);
    timer = undefined;
    void flush();
  };
  /** What is queued goes in a commit at the end of this turn, or within `withinMs`; a commit under way takes it next anyway. */
  const schedule = (withinMs: number) => {
    if (writing || immediate) return;
    if (withinMs <= 0) {
      immediate = true;
      setImmediate(run);
    } else timer ??= setTimeout(run, withinMs);
  };

  const failAll = (err: Error) => {
    const waiting = queue;
    queue = [];
    for (const p of waiting) p.reject(err);
  };

  /** One commit at a time: each is guarded by the sequence of the one before. */
  const flush = async () => {
    if (writing) return;
    writing = true;
    try {
      while (queue.length && !fenced && !closed) {
        let bytes = 0;
        let n = 0;
        while (n < queue.length && (n === 0 || bytes + queue[n]!.bytes <= MAX_COMMIT_BYTES)) bytes += queue[n++]!.bytes;
        const batch = queue.slice(0, n);
        queue = queue.slice(n);
        const id = `commit.${partition}.${claimSeq}.${counter++}`;
        const text = `{"type":"Commit","id":${JSON.stringify(id)},"at":${JSON.stringify(new Date().toISOString())},"from":${log.resumeFromNow()},"events":[${batch.flatMap((p) => p.texts).join(',')}]}`;
        // A Buffer from Node's pool: `TextEncoder.encode` allocates a fresh ArrayBuffer per call (see `encodeJson`).
        const data = Buffer.from(text, 'utf8');
        writingCommit(nats, subject, data, batch.flatMap((p) => p.events));
        for (;;) {
          try {
            // The same msg id on a retry: a first try that was stored after all answers as a duplicate, with its sequence.
            tail = await nats.publish(subject, data, { msgId: id, expectLastSubjectSeq: tail });
            for (const p of batch) p.resolve(tail);
            break;
          } catch (err) {
            if (isWrongLastSequence(err)) {
              fenced = true;
              const e = new Fenced(partition);
              for (const p of batch) p.reject(e);
              failAll(e);
              return;
            }
            // Stopping: a commit whose publish fails is not tried again (the next owner re-runs what it held).
            if (closed || signal?.aborted) {
              for (const p of batch) p.reject(err as Error);
              return;
            }
            await new Promise((r) => setTimeout(r, RETRY_MS));
          }
        }
      }
    } finally {
      writing = false;
    }
  };

  const log: PartitionLog = {
    partition,
    claimSeq,
    afterSeq,
    resumeFrom,
    resumeFromNow: () => resumeFrom,
    get tail() {
      return tail;
    },
    get fenced() {
      return fenced;
    },
    append(events, withinMs = 0) {
      if (fenced) return Promise.reject(new Fenced(partition));
      if (closed) return Promise.reject(new Error(`partition ${partition}: log closed`));
      // Inside a recorded span, as the event store does: a PRODUCER span until the commit is stored.
      if (!trace.getActiveSpan()?.isRecording()) return enqueue(events, withinMs);
      return inSpan(`append ${[...new Set(events.map((e) => e.type))].join(',')}`, {
        kind: SpanKind.PRODUCER,
        attributes: () => ({ 'jetcron.org_id': events[0]!.org_id, 'jetcron.event_id': events[0]!.id, 'messaging.system': 'nats', 'messaging.destination.name': subject }),
      }, () => enqueue(events, withinMs));
    },
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      forgetWriting(nats, subject);
      failAll(new Error(`partition ${partition}: log closed`));
    },
  };

  function enqueue(events: Envelope[], withinMs: number): Promise<number> {
    // Each event keeps the trace of the one who appended it: the commit's header can hold only one.
    const traceparent = currentTraceparent();
    const stored = traceparent ? events.map((e) => (e.traceparent ? e : { ...e, traceparent })) : events;
    const texts = stored.map(eventJson);
    const bytes = texts.reduce((t, s) => t + s.length + 1, 0);
    return new Promise<number>((resolve, reject) => {
      queue.push({ events: stored, texts, bytes, resolve, reject });
      // What the rest of this turn appends joins the same commit.
      schedule(withinMs);
    });
  }
  return log;
}
