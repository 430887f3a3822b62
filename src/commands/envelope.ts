/** What every stored event looks like on the wire. `data` is the event's own body. */
export interface Envelope<T extends string = string, D = unknown> {
  type: T;
  /**
   * The type's schema version (`src/commands/upcast.ts`): written by every appender, set
   * on every event a reader gets (one stored before versions reads as version 1).
   * Absent only on an event decided in this process and not stored yet.
   */
  v?: number;
  id: string;
  at: string;
  org_id: string;
  data: D;
  /**
   * Inside a commit (one message, events of many traces): the W3C trace context of the
   * one who decided this event, when tracing was on. A message of one event carries it
   * in its header instead.
   */
  traceparent?: string;
}

export interface StoredEvent<E extends Envelope = Envelope> {
  event: E;
  seq: number;
  subject: string;
  /** Its place in its message when that is a commit (`src/commands/commit.ts`); 0 or absent for a message of one event. */
  index?: number;
  /** The writer's W3C trace context (message header), when tracing was on where it was appended. */
  traceparent?: string | undefined;
}
