import { SUBJECTS } from '../../streams/subjects.ts';
import type { NotifySourceType } from '../commands/notification/types.ts';
import { evolveTask } from '../commands/task/decide.ts';
import { lastTaskEvent } from '../commands/task/load.ts';
import type { Envelope } from '../commands/envelope.ts';
import type { EventStore } from '../commands/store.ts';
import type { NotifySource } from './message.ts';
import { evolveMonitor } from '../commands/monitor/decide.ts';
import type { Monitor } from '../commands/monitor/types.ts';
import { monitorSubject } from '../commands/monitor/handlers.ts';
import { evolveSchedule } from '../commands/schedule/decide.ts';
import { scheduleSubject } from '../commands/schedule/handlers.ts';
import { evolveEndpoint } from '../commands/endpoint/decide.ts';
import type { Schedule } from '../commands/schedule/types.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';

/** Loads a resource as it is now, or null when it is gone (deleted, cancelled) or unknown. */
export type SourceResolver = (orgId: string, id: string) => Promise<NotifySource | null>;

type Notifiable = Pick<NotifySource, 'id' | 'org_id' | 'name' | 'notify_on_failure' | 'notify_on_recovery' | 'channels'> & {
  url?: string;
  on_failure_url?: string | null;
  on_recovery_url?: string | null;
};

/**
 * A resource from its aggregate: one direct get of its last event, which carries the
 * whole resource (null once deleted or cancelled). `url` is the resource's target
 * where it has one; monitors have none, and an endpoint may forward to ten.
 */
function resolverOf<E extends Envelope>(
  type: NotifySourceType,
  lastEvent: (orgId: string, id: string) => Promise<E | null>,
  evolve: (state: null, event: E) => Notifiable | null,
  opts: { url: boolean },
): SourceResolver {
  return async (orgId, id) => {
    const last = await lastEvent(orgId, id);
    const r = last ? evolve(null, last) : null;
    return r ? notifySource(type, r, opts) : null;
  };
}

/** What a notification says of a resource and how its owner wants to hear of it. */
function notifySource(type: NotifySourceType, r: Notifiable, opts: { url: boolean }): NotifySource {
  return {
    type, id: r.id, org_id: r.org_id, name: r.name, url: opts.url ? r.url ?? null : null,
    notify_on_failure: r.notify_on_failure, notify_on_recovery: r.notify_on_recovery,
    // Schedules have no on_failure_url/on_recovery_url of their own (the spec gives them none).
    on_failure_url: r.on_failure_url ?? null, on_recovery_url: r.on_recovery_url ?? null,
    channels: r.channels ?? null,
  };
}

/**
 * A monitor as the event that went down (or recovered) carries it: every monitor event
 * carries the whole monitor after it, its settings included (a change is stored before
 * any later decision of its owner), so its notification needs no read of the monitor.
 */
export const monitorSource = (m: Monitor): NotifySource => notifySource('monitor', m, { url: false });

/** A schedule as the event that disabled it carries it. */
export const scheduleSource = (s: Schedule): NotifySource => notifySource('schedule', s, { url: true });

/** An endpoint as the event that disabled one of its forward URLs carries it; the notification names that URL. */
export const forwardSource = (e: Endpoint, url: string): NotifySource => ({ ...notifySource('endpoint', e, { url: false }), url });

/**
 * The resource types that notify, each with how to load it. Schedules, monitors and
 * endpoints add their resolver here (and their outcome events to the reader).
 */
export function defaultResolvers(store: EventStore): Partial<Record<NotifySourceType, SourceResolver>> {
  const onSubject = <E extends Envelope>(subject: (orgId: string, id: string) => string) =>
    async (orgId: string, id: string) => (await store.last<E>(subject(orgId, id)))?.event ?? null;
  return {
    // A task of a batch that never changed has no subject of its own: its create is in the batch's commit.
    task: resolverOf('task', (orgId, id) => lastTaskEvent(store, orgId, id), evolveTask, { url: true }),
    schedule: resolverOf('schedule', onSubject(scheduleSubject), evolveSchedule, { url: true }),
    monitor: resolverOf('monitor', onSubject(monitorSubject), evolveMonitor, { url: false }),
    endpoint: resolverOf('endpoint', onSubject(SUBJECTS.endpoint), evolveEndpoint, { url: false }),
  };
}
