import { SUBJECTS } from '../../streams/definitions.ts';
import type { NotifySourceType } from '../commands/notification/types.ts';
import type { TaskEvent } from '../commands/task/types.ts';
import type { EventStore } from '../events/store.ts';
import type { NotifySource } from './message.ts';

/** Loads a resource as it is now, or null when it is gone (deleted, cancelled) or unknown. */
export type SourceResolver = (orgId: string, id: string) => Promise<NotifySource | null>;

/** A task from its aggregate: one direct get of its last event, which carries the whole task. */
export function taskResolver(store: EventStore): SourceResolver {
  return async (orgId, id) => {
    const last = await store.last<TaskEvent>(SUBJECTS.task(orgId, id));
    if (!last || last.event.type === 'TaskDeleted' || last.event.type === 'TaskCancelled') return null;
    const t = last.event.data.task;
    return {
      type: 'task',
      id: t.id,
      org_id: t.org_id,
      name: t.name,
      url: t.url,
      notify_on_failure: t.notify_on_failure,
      notify_on_recovery: t.notify_on_recovery,
      on_failure_url: t.on_failure_url,
      on_recovery_url: t.on_recovery_url,
    };
  };
}

/**
 * The resource types that notify, each with how to load it. Schedules, monitors and
 * endpoints add their resolver here (and their outcome events to the reader).
 */
export function defaultResolvers(store: EventStore): Partial<Record<NotifySourceType, SourceResolver>> {
  return { task: taskResolver(store) };
}
