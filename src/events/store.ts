import { STREAMS } from '../../streams/definitions.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { Envelope, StoredEvent } from './envelope.ts';
import { trace } from '@opentelemetry/api';
import { inSpan, SpanKind } from '../telemetry/tracing.ts';

export class ConcurrencyError extends Error {
  constructor(subject: string) {
    super(`concurrent write on ${subject}`);
    this.name = 'ConcurrencyError';
  }
}

export interface EventStore {
  /**
   * Appends one event to its aggregate's subject. `expectedSeq` is the stream
   * sequence of the last event the decision was based on (0 for a new aggregate);
   * `Nats-Msg-Id` = event id makes a retried publish a no-op.
   */
  append(subject: string, event: Envelope, expectedSeq?: number): Promise<number>;
  /** The aggregate's last event, or null when the subject has none. */
  last<E extends Envelope>(subject: string): Promise<StoredEvent<E> | null>;
  /** The event stored at this stream sequence, or null. */
  at<E extends Envelope>(seq: number): Promise<StoredEvent<E> | null>;
}

// Ids become subject tokens; a `*` or `>` from a careless caller would address other aggregates.
function assertLiteral(subject: string): void {
  if (/[*>\s]/.test(subject) || subject.split('.').some((t) => t === '')) throw new Error(`invalid subject ${JSON.stringify(subject)}`);
}

export function createEventStore(nats: Nats): EventStore {
  return {
    async append(subject, event, expectedSeq) {
      assertLiteral(subject);
      const publish = () => nats.publish(subject, encodeJson(event), { msgId: event.id, ...(expectedSeq === undefined ? {} : { expectLastSubjectSeq: expectedSeq }) });
      try {
        // Inside a recorded span: the append is a PRODUCER span of its own, and its context travels in the message.
        if (!trace.getActiveSpan()?.isRecording()) return await publish();
        return await inSpan(`append ${event.type}`, {
          kind: SpanKind.PRODUCER,
          attributes: () => ({ 'jetcron.org_id': event.org_id, 'jetcron.event_id': event.id, 'messaging.system': 'nats', 'messaging.destination.name': subject }),
        }, publish);
      } catch (err) {
        if (isWrongLastSequence(err)) throw new ConcurrencyError(subject);
        throw err;
      }
    },
    async last<E extends Envelope>(subject: string) {
      assertLiteral(subject);
      const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { last_by_subj: subject });
      if (!msg) return null;
      return { event: decodeJson<E>(msg.data), seq: msg.seq, subject: msg.subject };
    },
    async at<E extends Envelope>(seq: number) {
      const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { seq });
      if (!msg) return null;
      return { event: decodeJson<E>(msg.data), seq: msg.seq, subject: msg.subject };
    },
  };
}

