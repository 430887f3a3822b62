import type { Envelope } from '../../events/envelope.ts';

/** What an inbound event's delivery came to when it was routed. */
export type InboundOutcome = 'forwarding' | 'collected' | 'filtered' | 'rejected';

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
}

export type InboundEventEvent =
  | Envelope<'InboundEventReceived', { event: InboundEventRecord; endpoint: EndpointSnapshot; executions: ForwardPlan[] }>
  | Envelope<'InboundEventReplayed', { event: InboundEventRecord; endpoint: EndpointSnapshot; executions: ForwardPlan[] }>;
