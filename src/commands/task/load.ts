import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../../events/store.ts';
import { parentOf } from '../../lib/ids.ts';
import type { TaskCreatedEvent } from '../batch/types.ts';
import type { TaskEvent } from './types.ts';

/**
 * A task created in a batch's commit that has not changed since: its `TaskCreated`, read
 * from the commit its id names (`memberId`); null for any other id, or one no batch holds.
 */
export async function createdInBatch(store: EventStore, orgId: string, taskId: string): Promise<TaskCreatedEvent | null> {
  const batchId = parentOf(taskId, 'cmd');
  if (!batchId) return null;
  const stored = await store.lastMessage<TaskEvent>(SUBJECTS.batch(orgId, batchId));
  const created = stored?.events.find((e) => e.type === 'TaskCreated' && e.data.task.id === taskId);
  return (created as TaskCreatedEvent | undefined) ?? null;
}

/** A task's last event: on its own subject, or (never changed since) its create in its batch's commit. */
export async function lastTaskEvent(store: EventStore, orgId: string, taskId: string): Promise<TaskEvent | null> {
  const last = await store.last<TaskEvent>(SUBJECTS.task(orgId, taskId));
  return last ? last.event : createdInBatch(store, orgId, taskId);
}
