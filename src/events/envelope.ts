/** What every stored event looks like on the wire. `data` is the event's own body. */
export interface Envelope<T extends string = string, D = unknown> {
  type: T;
  id: string;
  at: string;
  org_id: string;
  data: D;
}

export interface StoredEvent<E extends Envelope = Envelope> {
  event: E;
  seq: number;
  subject: string;
  /** The writer's W3C trace context (message header), when tracing was on where it was appended. */
  traceparent?: string | undefined;
}
