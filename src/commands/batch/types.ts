import type { Envelope } from '../envelope.ts';
import type { TaskEvent } from '../task/types.ts';

export type TaskCreatedEvent = Extract<TaskEvent, { type: 'TaskCreated' }>;

/**
 * A whole batch accepted at once: the last event of one commit (on
 * `evt.<org>.creates.<n>`, or the batch's subject under an Idempotency-Key), after the
 * `TaskCreated` of each of its tasks (`created` counts them; each task's id names the
 * commit, `memberId`), and no task has a subject of its own until it changes. An older
 * shape carried the tasks instead (`tasks`), each also appended to its task's own
 * subject; such messages stay in the log and read as any other.
 */
export type BatchEvent = Envelope<
  'BatchAccepted',
  { batch_id: string; lane: string | null; flow_key?: string; scheduled_for: string; created?: number; tasks?: TaskCreatedEvent[] }
>;

/** What accepting a batch appends: its tasks' creates, then the batch (one commit). */
export type BatchCommitEvent = TaskCreatedEvent | BatchEvent;
