import type { Envelope } from '../envelope.ts';
import type { TaskEvent } from '../task/types.ts';

export type TaskCreatedEvent = Extract<TaskEvent, { type: 'TaskCreated' }>;

/**
 * A whole batch accepted at once. Since 2026-11-26 it is the last event of one commit
 * on the batch's subject, after the `TaskCreated` of each of its tasks (`created`
 * counts them; each task's id names the batch, `memberId`), and no task has a subject
 * of its own until it changes. Before, it carried the tasks (`tasks`), which were then
 * appended to each task's own subject (by the API at once, by the translator again
 * should the API have died half-way); such messages stay in the log and read as before.
 */
export type BatchEvent = Envelope<
  'BatchAccepted',
  { batch_id: string; lane: string | null; flow_key?: string; scheduled_for: string; created?: number; tasks?: TaskCreatedEvent[] }
>;

/** What accepting a batch appends: its tasks' creates, then the batch (one commit). */
export type BatchCommitEvent = TaskCreatedEvent | BatchEvent;
