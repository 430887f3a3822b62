import { conflict } from '../../lib/errors.ts';

/** What a retry needs of the execution it retries (its read-model row). */
export interface RetriedExecution {
  id: string;
  status: string;
  source_type: string;
  source_id: string;
  url: string;
  /** An endpoint delivery's inbound event. */
  parent_id: string | null;
}

/** The command a retry runs: its source's trigger (or the event's replay to one URL), marked `retry_of`. */
export type RetryCommand =
  | { type: 'TriggerTask'; taskId: string; retryOf: string }
  | { type: 'TriggerSchedule'; scheduleId: string; retryOf: string }
  | { type: 'ReplayDelivery'; endpointId: string; eventId: string; url: string; retryOf: string };

const FINAL = new Set(['success', 'failed', 'timeout', 'cancelled']);

/**
 * `POST /executions/{id}/retry` (CONTRACT.md, "Failure recovery"): a final execution of
 * any status is retried as its source runs now; one still pending or running is 409.
 * Pure: the caller loads the row and runs the command (whose own decider says whether
 * the source still exists: if not, 409 `field: "source"`).
 */
export function decideRetry(e: RetriedExecution): RetryCommand {
  if (!FINAL.has(e.status)) throw conflict(`Execution is ${e.status}: only a finished execution can be retried`, 'status');
  switch (e.source_type) {
    case 'task':
      return { type: 'TriggerTask', taskId: e.source_id, retryOf: e.id };
    case 'schedule':
      return { type: 'TriggerSchedule', scheduleId: e.source_id, retryOf: e.id };
    case 'endpoint':
      if (!e.parent_id) throw conflict('The execution\'s inbound event is unknown', 'source');
      return { type: 'ReplayDelivery', endpointId: e.source_id, eventId: e.parent_id, url: e.url, retryOf: e.id };
    default:
      throw conflict(`An execution of a ${e.source_type} cannot be retried`, 'source');
  }
}
