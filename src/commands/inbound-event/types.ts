import type { Envelope } from '../envelope.ts';

/** What an inbound event's delivery came to when it was routed. */
export type InboundOutcome = 'forwarding' | 'collected' | 'filtered' | 'rejected' | 'debounced';

/** The endpoint as the event was routed: what its jobs need when they are built later. */
export interface EndpointSnapshot {
  id: string;
  name: string;
  use_lane: boolean;
  retry_attempts: number;
}

/**
 * One delivery of the event to one forward URL. The request itself stays in INBOUND
 * (the only copy of the body and headers); a plan keeps only what replaces them:
 * null = the inbound request's own method, headers or body.
 */
export interface ForwardPlan {
  execution_id: string;
  url: string;
  method: string | null;
  /** Merged over the inbound headers; these win. */
  headers: Record<string, string> | null;
  body: string | null;
  scheduled_for: string;
  /** A script hook failed (filter, transform or route): the execution fails with this, unforwarded. */
  script_error?: string;
  /**
   * Debounce: the execution is the one an earlier event of the window planned, still
   * pending; this event's request replaces its payload and keeps its time.
   */
  replaces?: true;
  /** A retry of this earlier delivery (`POST /executions/{id}/retry`). */
  retry_of?: string;
}

/** The inbound event's row, without the request body and headers (those are in INBOUND). */
export interface InboundEventRecord {
  id: string;
  endpoint_id: string;
  method: string;
  path: string;
  query: string;
  source_ip: string | null;
  received_at: string;
  body_size: number;
  /** Stream sequence of the request in INBOUND. */
  inbound_seq: number;
  outcome: InboundOutcome;
  /** What the endpoint script logged for this event (verify, filter, transform, route). Absent = none. */
  script_logs?: string[];
  /** Why the event was rejected, or the hook error that failed its deliveries. Absent = none. */
  error_message?: string | null;
  /** transform()'s debounce key, when the event was debounced. */
  debounce_key?: string;
}

/**
 * A debounce window of an endpoint: events whose transform() returns this key until
 * `run_at` update the same executions (one per forward URL) instead of adding new ones.
 */
export interface InboundDebounceWindow {
  endpoint_id: string;
  debounce_key: string;
  /** The event that opened it. */
  event_id: string;
  opened_at: string;
  run_at: string;
  /** Forward URL → the window's execution for it. */
  executions: Record<string, string>;
}

export type InboundEventEvent =
  | Envelope<'InboundEventReceived', { event: InboundEventRecord; endpoint: EndpointSnapshot; executions: ForwardPlan[] }>
  | Envelope<'InboundEventReplayed', { event: InboundEventRecord; endpoint: EndpointSnapshot; executions: ForwardPlan[] }>;

export type InboundDebounceEvent = Envelope<'InboundDebounceOpened', { window: InboundDebounceWindow }>;
