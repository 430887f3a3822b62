import type { ExecutionSource } from './types.ts';

/** One outbound HTTP attempt of an execution, as a task partition owner holds and sends it. */
export interface AttemptJob {
  kind: 'attempt';
  org_id: string;
  execution_id: string;
  source: ExecutionSource;
  attempt: number;
  /** 1 + retry_attempts. */
  max_attempts: number;
  scheduled_for: string;
  request: { url: string; method: string; headers: Record<string, string>; body: string | null; timeout_ms: number };
  expected_status_codes: number[] | null;
  expected_body_pattern: string | null;
  /** Resolved: the execution's push-level callback, else the task's. */
  callback_url: string | null;
  /** A schedule's next tick: a retry that would land after it is skipped (the tick takes over). */
  next_tick_at?: string | null;
  /** The lane (within the organization) this execution holds while it runs; null = none. */
  lane: string | null;
  /** The task's or schedule's Lua script, for `on_response` (absent in jobs written before scripts ran). */
  script?: string | null;
  /** The push-level callback alone, kept so a retry re-resolves against the task as it is then. */
  push_callback_url: string | null;
  /**
   * An endpoint's forwarding: the request is the stored inbound one (INBOUND) with
   * the plan's replacements; `request` holds only the URL and timeout then.
   */
  inbound?: InboundRef;
}

/** Where an endpoint execution's request lives and what replaces parts of it. */
export interface InboundRef {
  /** The inbound event (`evt_…`). */
  event_id: string;
  /** Its INBOUND stream sequence. */
  seq: number;
  /** EVENTS sequence of the event that planned this execution (received or replayed). */
  origin_seq: number;
  /** null = the inbound request's own value. */
  method: string | null;
  headers: Record<string, string> | null;
  body: string | null;
  /** The endpoint script failed (filter, transform or route): recorded failed, not sent. */
  script_error?: string;
  /** What the endpoint script logged for the event: every attempt's `script_logs`. */
  script_logs?: string[];
}

/** One delivery try of an execution's completion callback. */
export interface CallbackJob {
  kind: 'callback';
  org_id: string;
  execution_id: string;
  source: ExecutionSource;
  url: string;
  body: string;
  attempt: number;
}

/** What the attempt runner sends: an attempt or a callback try. */
export type Job = AttemptJob | CallbackJob;
