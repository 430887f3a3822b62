import { evolveMonitor } from '../commands/monitor/decide.ts';
import { monitorSubject } from '../commands/monitor/handlers.ts';
import type { Monitor, MonitorEvent } from '../commands/monitor/types.ts';
import type { DeadlineJob } from '../dispatchers/job.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';

export function deadlineJob(m: Monitor): DeadlineJob {
  return {
    kind: 'deadline',
    org_id: m.org_id,
    execution_id: `${m.id}@${m.deadline_at}`,
    source: { type: 'monitor', id: m.id, name: m.name },
    attempt: 1,
    deadline_at: m.deadline_at!,
  };
}

/**
 * A deadline came due: unless a ping, pause or change moved it (the monitor's
 * `deadline_at` is no longer this one), the monitor goes down. Guarded by the
 * monitor subject's sequence, so a ping arriving at the same moment wins.
 */
export async function recordDeadline(deps: { store: EventStore; clock: Clock }, job: DeadlineJob): Promise<void> {
  const subject = monitorSubject(job.org_id, job.source.id);
  for (let attempt = 0; attempt < 5; attempt++) {
    const last = await deps.store.last<MonitorEvent>(subject);
    const m = last ? evolveMonitor(null, last.event) : null;
    if (!last || !m || m.paused || !m.enabled || m.status !== 'up' || m.deadline_at !== job.deadline_at) return;
    const now = new Date(deps.clock.now()).toISOString();
    const event: MonitorEvent = {
      type: 'MonitorWentDown',
      id: `${m.id}.down.${job.deadline_at}`,
      at: now,
      org_id: m.org_id,
      data: { monitor: { ...m, status: 'down', deadline_at: null, updated_at: now }, reason: 'missed' },
    };
    try {
      await deps.store.append(subject, event, last.seq);
      return;
    } catch (err) {
      if (!(err instanceof ConcurrencyError)) throw err;
    }
  }
  // Still contended: fail, so the timer is fired again (a conflict is transient), never dropped.
  throw new ConcurrencyError(subject);
}
