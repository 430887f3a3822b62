import { execute } from '../commands/execute.ts';
import { decideSchedule, evolveSchedule } from '../commands/schedule/decide.ts';
import { scheduleSubject } from '../commands/schedule/handlers.ts';
import type { TickJob } from '../commands/execution/job.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';

/**
 * A due tick becomes `ScheduleTicked` on the schedule's subject, or nothing when it
 * is no longer the schedule's next one (`decideSchedule`, `RecordTick`). The append
 * is guarded by the subject's sequence: a concurrent update wins and the tick is
 * decided again. Still contended when the budget is spent: a ConcurrencyError
 * (transient), so the timer is fired again, never dropped.
 */
export async function recordTick(deps: { store: EventStore; clock: Clock }, job: TickJob): Promise<void> {
  const subject = scheduleSubject(job.org_id, job.source.id);
  await execute(deps, subject, { type: 'RecordTick', tickAt: job.tick_at }, decideSchedule, evolveSchedule, { contended: () => new ConcurrencyError(subject) });
}
