import { evolveSchedule, nextRunAt, tickExecutionId } from '../commands/schedule/decide.ts';
import { scheduleSubject } from '../commands/schedule/handlers.ts';
import type { ScheduleEvent } from '../commands/schedule/types.ts';
import type { TickJob } from '../dispatchers/job.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';

/**
 * A due tick becomes `ScheduleTicked` on the schedule's subject: its id is derived
 * from the tick (two schedulers firing it make one event) and the append is guarded
 * by the subject's sequence (a concurrent update wins, and we decide again). A tick
 * that is no longer the schedule's next one (updated, disabled, deleted) is dropped.
 * The next tick counts from now, so ticks missed while the service was down run once.
 */
export async function recordTick(deps: { store: EventStore; clock: Clock }, job: TickJob): Promise<void> {
  const subject = scheduleSubject(job.org_id, job.source.id);
  for (let attempt = 0; attempt < 5; attempt++) {
    const last = await deps.store.last<ScheduleEvent>(subject);
    const schedule = last ? evolveSchedule(null, last.event) : null;
    if (!last || !schedule || !schedule.enabled || schedule.next_run_at !== job.tick_at) return;
    const now = deps.clock.now();
    const next = nextRunAt(schedule, Math.max(now, Date.parse(job.tick_at)));
    const event: ScheduleEvent = {
      type: 'ScheduleTicked',
      id: `${schedule.id}.tick.${job.tick_at}`,
      at: new Date(now).toISOString(),
      org_id: job.org_id,
      data: {
        schedule: { ...schedule, next_run_at: next },
        execution: { id: tickExecutionId(schedule.id, job.tick_at), scheduled_for: job.tick_at, callback_url: null },
        next_run_at: next!,
      },
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
