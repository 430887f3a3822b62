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
  const subject = SUBJECTS.batch(orgId, batchId);
  const recent = recentBatches(store);
  let creates = recent.get(subject);
  if (creates) {
    // Most recently used last.
    recent.delete(subject);
    recent.set(subject, creates);
  } else {
    const stored = await store.lastMessage<TaskEvent>(subject);
    if (!stored) return null;
    creates = new Map();
    for (const e of stored.events) if (e.type === 'TaskCreated') creates.set(e.data.task.id, e as TaskCreatedEvent);
    recent.set(subject, creates);
    if (recent.size > RECENT_BATCHES) recent.delete(recent.keys().next().value!);
  }
  return creates.get(taskId) ?? null;
}

/**
 * A batch's commit is written once and never changes, so the creates of the last few
 * read are kept, by task id: a command on every task of a batch (a lane cancel of 1,000)
 * reads and decodes its commit once, not once per task.
 */
const RECENT_BATCHES = 16;
const recentByStore = new WeakMap<EventStore, Map<string, Map<string, TaskCreatedEvent>>>();
function recentBatches(store: EventStore): Map<string, Map<string, TaskCreatedEvent>> {
  let recent = recentByStore.get(store);
  if (!recent) recentByStore.set(store, (recent = new Map()));
  return recent;
}

/** A task's last event: on its own subject, or (never changed since) its create in its batch's commit. */
export async function lastTaskEvent(store: EventStore, orgId: string, taskId: string): Promise<TaskEvent | null> {
  const last = await store.last<TaskEvent>(SUBJECTS.task(orgId, taskId));
  return last ? last.event : createdInBatch(store, orgId, taskId);
}
