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
  /** The push-level callback the execution was triggered with (null: none, the source's applies). */
  callback_url: string | null;
}

/** The command a retry runs: its source's trigger (or the event's replay to one URL), marked `retry_of`. */
export type RetryCommand =
  | { type: 'TriggerTask'; taskId: string; retryOf: string; callbackUrl: string | null }
  | { type: 'TriggerSchedule'; scheduleId: string; retryOf: string; callbackUrl: string | null }
  | { type: 'ReplayDelivery'; endpointId: string; eventId: string; url: string; retryOf: string };

const FINAL = new Set(['success', 'failed', 'timeout', 'cancelled']);

/**
 * `POST /executions/{id}/retry` (CONTRACT.md, "Failure recovery"): a final execution of
 * any status is retried as its source runs now; one still pending or running is 409.
 * Pure: the caller loads the row and runs the command (whose own decider says whether
 * the source still exists: if not, 409 `field: "source"`). A push-level callback given
 * for the execution (spec "Callbacks": it is the execution's, over the task's) is given
 * for its retry too: the retry stands in for that execution, and whoever asked to hear
 * of it hears of the retry; without one the source's callback applies, as it does today.
 */
export function decideRetry(e: RetriedExecution): RetryCommand {
  if (!FINAL.has(e.status)) throw conflict(`Execution is ${e.status}: only a finished execution can be retried`, 'status');
  switch (e.source_type) {
    case 'task':
      return { type: 'TriggerTask', taskId: e.source_id, retryOf: e.id, callbackUrl: e.callback_url };
    case 'schedule':
      return { type: 'TriggerSchedule', scheduleId: e.source_id, retryOf: e.id, callbackUrl: e.callback_url };
    case 'endpoint':
      if (!e.parent_id) throw conflict('The execution\'s inbound event is unknown', 'source');
      return { type: 'ReplayDelivery', endpointId: e.source_id, eventId: e.parent_id, url: e.url, retryOf: e.id };
    default:
      throw conflict(`An execution of a ${e.source_type} cannot be retried`, 'source');
  }
}
