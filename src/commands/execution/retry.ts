import { ApiError, conflict } from '../../lib/errors.ts';
import type { CommandMeta } from '../meta.ts';
import { decideSchedule } from '../schedule/decide.ts';
import type { Schedule, ScheduleEvent } from '../schedule/types.ts';
import { decideTask } from '../task/decide.ts';
import type { RetryIds, Task, TaskEvent } from '../task/types.ts';

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

/** A source as a bulk job's worker read it: its state (null: deleted, or never of this organization) and the sequence of that state. */
export interface ReadSource<S> {
  state: S | null;
  seq: number;
}

/**
 * A bulk job's retry of a task's or schedule's execution, decided on the source as it
 * was read (`source`), for the job's group commit on the jobs subject: the trigger its
 * own command decides (`decideTask`, `decideSchedule`: the rule lives there once), under
 * the ids derived from the job's position and marked with the sequence of the state it
 * carries (`source_seq`), so the owners and the projector know a later change or delete
 * of the source wins over it. A source gone is 409 `field: "source"`, as for retry one.
 */
export function decideGroupTrigger(
  command: Extract<RetryCommand, { type: 'TriggerTask' | 'TriggerSchedule' }>,
  source: ReadSource<Task> | ReadSource<Schedule>,
  ids: RetryIds,
  meta: CommandMeta,
): TaskEvent | ScheduleEvent {
  const marks = { callbackUrl: command.callbackUrl, retryOf: command.retryOf, ids, sourceSeq: source.seq };
  try {
    const [event] = command.type === 'TriggerTask'
      ? decideTask({ type: 'TriggerTask', ...marks }, source.state as Task | null, meta)
      : decideSchedule({ type: 'TriggerSchedule', ...marks }, source.state as Schedule | null, meta);
    if (!event) throw new Error(`${command.type} decided nothing`);
    return event;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) throw sourceGone(err.message);
    throw err;
  }
}

/** A retry's source no longer exists: 409 naming `source` (the source's own 404, as the retry's caller sees it). */
export const sourceGone = (why: string) => conflict(`The execution's source is gone: ${why}`, 'source');
