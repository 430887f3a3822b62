import { SUBJECTS } from '../../streams/definitions.ts';
import type { NotifySourceType } from '../commands/notification/types.ts';
import type { TaskEvent } from '../commands/task/types.ts';
import type { EventStore } from '../events/store.ts';
import type { NotifySource } from './message.ts';
import { evolveMonitor } from '../commands/monitor/decide.ts';
import { monitorSubject } from '../commands/monitor/handlers.ts';
import type { MonitorEvent } from '../commands/monitor/types.ts';
import { evolveSchedule } from '../commands/schedule/decide.ts';
import { scheduleSubject } from '../commands/schedule/handlers.ts';
import type { ScheduleEvent } from '../commands/schedule/types.ts';
import { evolveEndpoint } from '../commands/endpoint/decide.ts';
import type { EndpointEvent } from '../commands/endpoint/types.ts';

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

/** A schedule: it has no on_failure_url/on_recovery_url of its own (the spec gives it none). */
export function scheduleResolver(store: EventStore): SourceResolver {
  return async (orgId, id) => {
    const last = await store.last<ScheduleEvent>(scheduleSubject(orgId, id));
    const s = last ? evolveSchedule(null, last.event) : null;
    if (!s) return null;
    return {
      type: 'schedule', id: s.id, org_id: s.org_id, name: s.name, url: s.url,
      notify_on_failure: s.notify_on_failure, notify_on_recovery: s.notify_on_recovery, on_failure_url: null, on_recovery_url: null,
    };
  };
}

export function monitorResolver(store: EventStore): SourceResolver {
  return async (orgId, id) => {
    const last = await store.last<MonitorEvent>(monitorSubject(orgId, id));
    const m = last ? evolveMonitor(null, last.event) : null;
    if (!m) return null;
    return {
      type: 'monitor', id: m.id, org_id: m.org_id, name: m.name, url: null,
      notify_on_failure: m.notify_on_failure, notify_on_recovery: m.notify_on_recovery,
      on_failure_url: m.on_failure_url, on_recovery_url: m.on_recovery_url,
    };
  };
}

/** An endpoint: a failure is one forwarding that ended failed; its forward URLs may be several, so no single `url`. */
export function endpointResolver(store: EventStore): SourceResolver {
  return async (orgId, id) => {
    const last = await store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, id));
    const e = last ? evolveEndpoint(null, last.event) : null;
    if (!e) return null;
    return {
      type: 'endpoint', id: e.id, org_id: e.org_id, name: e.name, url: null,
      notify_on_failure: e.notify_on_failure, notify_on_recovery: e.notify_on_recovery,
      on_failure_url: e.on_failure_url, on_recovery_url: e.on_recovery_url,
    };
  };
}

/**
 * The resource types that notify, each with how to load it. Schedules, monitors and
 * endpoints add their resolver here (and their outcome events to the reader).
 */
export function defaultResolvers(store: EventStore): Partial<Record<NotifySourceType, SourceResolver>> {
  return { task: taskResolver(store), schedule: scheduleResolver(store), monitor: monitorResolver(store), endpoint: endpointResolver(store) };
}
