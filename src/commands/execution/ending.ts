import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../store.ts';
import type { EndpointEvent } from '../endpoint/types.ts';
import type { TaskEvent } from '../task/types.ts';
import type { ExecutionEvent, ExecutionSource } from './types.ts';
import { lastTaskEvent } from '../task/load.ts';

/**
 * `ExecutionCancelled` for an execution that will not run (again). Its id is fixed
 * per execution, so deciding it twice (a takeover, an owner and a key owner) records
 * it once.
 */
export function executionCancelled(
  orgId: string,
  data: { execution_id: string; source: ExecutionSource; reason: string; lane: string | null },
  nowMs: number,
): ExecutionEvent {
  return { type: 'ExecutionCancelled', id: `${data.execution_id}.cancelled`, at: new Date(nowMs).toISOString(), org_id: orgId, data };
}

/**
 * Whether a queued execution's task or endpoint is gone (deleted, or a task cancelled
 * with its lane): one direct get of its last event. Other sources answer false.
 */
export async function sourceGone(store: EventStore, orgId: string, source: ExecutionSource): Promise<boolean> {
  if (source.type === 'endpoint') {
    const last = await store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, source.id));
    return !last || last.event.type === 'EndpointDeleted';
  }
  if (source.type !== 'task') return false;
  const last = await lastTaskEvent(store, orgId, source.id);
  return !last || last.type === 'TaskDeleted' || last.type === 'TaskCancelled';
}
