import { recordTick as recordScheduleTick } from '../commands/schedule/handlers.ts';
import type { TickJob } from '../commands/execution/job.ts';
import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';

/** A tick timer of TIMERS fired (`JETCRON_DISPATCH=queue`: the task owners hold ticks otherwise): recorded as any tick (`recordTick`). */
export async function recordTick(deps: { store: EventStore; clock: Clock }, job: TickJob): Promise<void> {
  await recordScheduleTick(deps, job.org_id, job.source.id, job.tick_at);
}
