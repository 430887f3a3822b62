import type { Envelope } from '../envelope.ts';

/**
 * A bulk job (CONTRACT.md "Failure recovery"): a retry of executions, or a replay of an
 * endpoint's inbound events. Its set (the executions or events, oldest first) is fixed when it is accepted and travels in
 * `RetryJobAccepted`; each step of its worker is an event naming the execution and
 * what came of it, so the job's progress is the log's.
 */
export interface RetryJob {
  id: string;
  org_id: string;
  /** `retry`: executions retried (`POST /executions/retry`); `replay`: an endpoint's inbound events replayed (`POST /endpoints/{id}/events/replay`). */
  kind: 'retry' | 'replay';
  /** A replay job's endpoint. */
  endpoint_id?: string;
  /** A replay job's forward URLs; null = every forward URL of the endpoint when each event's turn comes. */
  forward_urls?: string[] | null;
  status: 'running' | 'done' | 'cancelled';
  /** The filter as accepted (the list's filter names and values). */
  filter: Record<string, string | boolean>;
  total: number;
  /** Retried so far. */
  done: number;
  /** No longer qualifying when their turn came (already retried, source gone). */
  skipped: number;
  /** The next execution of the set to take: done + skipped. */
  position: number;
  created_at: string;
  finished_at: string | null;
}

export type JobStepOutcome = 'retried' | 'skipped';

/** What came of one execution (a replay job: one inbound event) of the set. */
export interface JobStep {
  execution_id: string;
  outcome: JobStepOutcome;
  /** The new execution, when retried. */
  retry_id: string | null;
  /** Why it was skipped. */
  reason: string | null;
}

export type JobEvent =
  /** `execution_ids`: the set (a replay job's are inbound event ids). */
  | Envelope<'RetryJobAccepted', { job: RetryJob; execution_ids: string[] }>
  /** `steps`: the executions of the set from the position before, in order (a worker's group). */
  | Envelope<'RetryJobStepped', { job: RetryJob; steps: JobStep[] }>
  | Envelope<'RetryJobCancelled', { job: RetryJob }>;

export type JobCommand =
  | { type: 'AcceptRetryJob'; orgId: string; jobId: string; filter: RetryJob['filter']; executionIds: string[]; replay?: { endpointId: string; forwardUrls: string[] | null } }
  /** The steps taken from `position` on, in the set's order. */
  | { type: 'RecordJobSteps'; jobId: string; position: number; steps: JobStep[] }
  | { type: 'CancelJob'; jobId: string };

/** At most this many executions in one job's set. */
export const MAX_JOB_SET = 10_000;
