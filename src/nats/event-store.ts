import { trace } from '@opentelemetry/api';
import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { commitBytes, commitMessage, eventsOf } from '../commands/commit.ts';
import { eventJson } from '../commands/upcast.ts';
import type { Envelope, StoredEvent } from '../commands/envelope.ts';
import { ConcurrencyError, type EventStore } from '../commands/store.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import { currentTraceparent, inSpan, SpanKind } from '../telemetry/tracing.ts';
import type { Nats } from './connection.ts';
import { isWrongLastSequence } from './jetstream-errors.ts';

/** The event store on the EVENTS stream: one subject per aggregate, direct gets to load. */
// Ids become subject tokens; a `*` or `>` from a careless caller would address other aggregates.
function assertLiteral(subject: string): void {
  if (/[*>\s]/.test(subject) || subject.split('.').some((t) => t === '')) throw new Error(`invalid subject ${JSON.stringify(subject)}`);
}

export function createEventStore(nats: Nats): EventStore & { primeKnownSeq(): Promise<void> } {
  /** The highest stream sequence seen: this store's own appends, and the sequences others report written or projected. */
  let known = 0;
  const saw = (seq: number) => {
    if (seq > known) known = seq;
    return seq;
  };
  let watching = false;
  const watchSeqs = () => {
    if (watching) return;
    watching = true;
    // `<org> <seq>` from API processes, `<seq>` from the projector: both name stored messages.
    const onSeq = (_err: unknown, m: { string(): string }) => void saw(Number(m.string().split(' ').pop()) || 0);
    nats.nc.subscribe(SUBJECTS.written, { callback: onSeq });
    nats.nc.subscribe(SUBJECTS.projected, { callback: onSeq });
  };
  /**
   * A guarded publish of one message (an event, or a commit named by `head`, its last
   * event): inside a recorded span it is a PRODUCER span of its own, whose context
   * travels in the message; a wrong last sequence is a ConcurrencyError.
   */
  const guarded = async (subject: string, data: Uint8Array, head: Envelope, types: string, expectedSeq: number | undefined): Promise<number> => {
    const publish = () => nats.publish(subject, data, { msgId: head.id, ...(expectedSeq === undefined ? {} : { expectLastSubjectSeq: expectedSeq }) }).then(saw);
    try {
      if (!trace.getActiveSpan()?.isRecording()) return await publish();
      return await inSpan(`append ${types}`, {
        kind: SpanKind.PRODUCER,
        attributes: () => ({ 'jetcron.org_id': head.org_id, 'jetcron.event_id': head.id, 'messaging.system': 'nats', 'messaging.destination.name': subject }),
      }, publish);
    } catch (err) {
      if (isWrongLastSequence(err)) throw new ConcurrencyError(subject);
      throw err;
    }
  };
  /** The events of the subject's last message, or null when it has none. */
  const lastMessage = async <E extends Envelope>(subject: string) => {
    assertLiteral(subject);
    const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { last_by_subj: subject });
    return msg ? { events: eventsOf<E>(decodeJson<unknown>(msg.data)), seq: msg.seq, subject: msg.subject } : null;
  };

  return {
    async append(subject, event, expectedSeq) {
      assertLiteral(subject);
      // A Buffer from Node's pool, as `encodeJson` makes it; the event with its version.
      return guarded(subject, Buffer.from(eventJson(event), 'utf8'), event, event.type, expectedSeq);
    },
    async appendCommit(subject, events, expectedSeq, texts) {
      assertLiteral(subject);
      const last = events[events.length - 1]!;
      // Each event keeps the trace of the one who appended it: the message's header can hold only one.
      const traceparent = currentTraceparent();
      const retrace = !!traceparent && events.some((e) => !e.traceparent);
      const commit = commitMessage(last.id, retrace ? events.map((e) => (e.traceparent ? e : { ...e, traceparent })) : [...events], new Date());
      // Events given as text go in as that text unless traced here: the same JSON as encoding the commit whole.
      const data = texts && texts.length === events.length && !retrace ? commitBytes(commit, texts) : encodeJson(commit);
      return guarded(subject, data, last, [...new Set(events.map((e) => e.type))].join(','), expectedSeq);
    },
    traceparent: () => currentTraceparent(),
    knownSeq() {
      watchSeqs();
      return known;
    },
    /** Starts following the sequences others write from the stream's last one now (an API process, before it serves). */
    async primeKnownSeq() {
      watchSeqs();
      saw((await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq);
    },
    async nextMessage<E extends Envelope>(subject: string, fromSeq: number) {
      assertLiteral(subject);
      const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { next_by_subj: subject, seq: Math.max(1, fromSeq) });
      return msg ? { events: eventsOf<E>(decodeJson<unknown>(msg.data)), seq: msg.seq } : null;
    },
    lastMessage,
    async last<E extends Envelope>(subject: string) {
      const msg = await lastMessage<E>(subject);
      if (!msg) return null;
      return { event: msg.events[msg.events.length - 1]!, seq: msg.seq, subject: msg.subject, index: msg.events.length - 1 };
    },
    async at<E extends Envelope>(seq: number, pick?: (event: E) => boolean) {
      const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { seq });
      if (!msg) return null;
      const events = eventsOf<E>(decodeJson<unknown>(msg.data));
      const index = pick ? events.findIndex(pick) : 0;
      return index < 0 ? null : { event: events[index]!, seq: msg.seq, subject: msg.subject, index };
    },
  };
}

