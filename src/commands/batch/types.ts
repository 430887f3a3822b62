import type { Envelope } from '../../events/envelope.ts';
import type { TaskEvent } from '../task/types.ts';

/**
 * A whole batch in one message, so accepting it is atomic: it carries the
 * TaskCreated event of every task, which are then appended to each task's own
 * subject (by the API at once, and by the scheduler again should the API die
 * half-way; the guarded appends make the second pass a no-op).
 */
export type BatchEvent = Envelope<
  'BatchAccepted',
  { batch_id: string; lane: string; scheduled_for: string; tasks: Array<Extract<TaskEvent, { type: 'TaskCreated' }>> }
>;
