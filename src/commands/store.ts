import type { Envelope, StoredEvent } from './envelope.ts';

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
  /**
   * Appends `events` as one commit (one message, `src/commands/commit.ts`) to `subject`,
   * guarded as `append` is; `Nats-Msg-Id` = the last event's id. `texts`: each event's
   * JSON when the caller has it already (`eventJson`: one `JSON.stringify` per event, not two).
   */
  appendCommit(subject: string, events: readonly Envelope[], expectedSeq: number | undefined, texts?: readonly string[]): Promise<number>;
  /**
   * The W3C trace context of the caller now (tracing on), for an event decided now and
   * appended later in a commit of many callers' events.
   */
  traceparent?(): string | undefined;
  /** Every event of the subject's last message (a commit's list, or the one event), or null when the subject has none. */
  lastMessage<E extends Envelope>(subject: string): Promise<{ events: E[]; seq: number } | null>;
  /** The aggregate's last event (of a commit: its last one), or null when the subject has none. */
  last<E extends Envelope>(subject: string): Promise<StoredEvent<E> | null>;
  /**
   * A stream sequence at or below that of any message appended from now on (0 when this
   * store knows none yet): what an id names to be found by reading on from (`withSeqHint`).
   */
  knownSeq?(): number;
  /** The first message on `subject` at or after stream sequence `fromSeq`, or null when there is none. */
  nextMessage?<E extends Envelope>(subject: string, fromSeq: number): Promise<{ events: E[]; seq: number } | null>;
  /** The event stored at this stream sequence (of a commit: its first one, or the first that `pick` takes), or null. */
  at<E extends Envelope>(seq: number, pick?: (event: E) => boolean): Promise<StoredEvent<E> | null>;
}
