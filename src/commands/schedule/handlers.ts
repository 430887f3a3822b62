import { SUBJECTS } from '../../../streams/subjects.ts';
import { execute, type CommandDeps, type Decided } from '../execute.ts';
import { ConcurrencyError } from '../store.ts';
import { orgAggregate } from '../org-aggregate.ts';
import type { Plan } from '../organization/types.ts';
import { featuresOf, type PlanLimit } from '../plan-rules.ts';
import { decideSchedule, evolveSchedule, type ScheduleCommand } from './decide.ts';
import type { Schedule, ScheduleEvent, ScheduleInput } from './types.ts';
import type { FinalResult } from '../destination-health.ts';

type Result = Decided<Schedule, ScheduleEvent>;

export const scheduleSubject = SUBJECTS.schedule;

const schedules = orgAggregate({ kind: 'schedule', idPrefix: 'sch_', notFound: 'Schedule not found', subject: scheduleSubject, decide: decideSchedule, evolve: evolveSchedule });

const run = (deps: CommandDeps, orgId: string, id: string, command: ScheduleCommand): Promise<Result> => schedules.run(deps, orgId, id, command);

/** `plan.live` lists the organization's schedules in the read model, for the Free plan's limit. */
export function createSchedule(
  deps: CommandDeps,
  orgId: string,
  input: ScheduleInput & { url: string; cron: string },
  plan: PlanLimit,
  onceId?: string,
): Promise<Result> {
  return schedules.create(deps, orgId, { type: 'CreateSchedule', orgId, plan: featuresOf(plan), input }, plan, onceId);
}

export const updateSchedule = (deps: CommandDeps, orgId: string, id: string, input: ScheduleInput, plan: Plan) =>
  run(deps, orgId, id, { type: 'UpdateSchedule', plan, input });
export const deleteSchedule = (deps: CommandDeps, orgId: string, id: string) => run(deps, orgId, id, { type: 'DeleteSchedule' });
export const triggerSchedule = (deps: CommandDeps, orgId: string, id: string, callbackUrl: string | null, retryOf?: string) =>
  run(deps, orgId, id, { type: 'TriggerSchedule', callbackUrl, ...(retryOf ? { retryOf } : {}) });


/**
 * A due tick becomes `ScheduleTicked` on the schedule's subject, or nothing when it is
 * no longer the schedule's next one (`decideSchedule`, `RecordTick`: the missed-ticks
 * rule too). The append is guarded by the subject's sequence: a concurrent update wins
 * and the tick is decided again; two owners (one stale) firing it store one tick.
 * Still contended when the budget is spent: a ConcurrencyError (transient), and the
 * caller fires it again, never drops it.
 */
export async function recordTick(deps: CommandDeps, orgId: string, scheduleId: string, tickAt: string): Promise<Result> {
  const subject = scheduleSubject(orgId, scheduleId);
  return execute(deps, subject, { type: 'RecordTick', tickAt }, decideSchedule, evolveSchedule, { contended: () => new ConcurrencyError(subject) });
}

/**
 * Destination health: one of the schedule's executions ended for good. Guarded like a
 * tick; the decider passes over a result counted before, so the counting reader may
 * hand the same result again after a crash.
 */
export function countScheduleResult(deps: CommandDeps, orgId: string, scheduleId: string, result: FinalResult): Promise<Result> {
  const subject = scheduleSubject(orgId, scheduleId);
  return execute(deps, subject, { type: 'CountResult', result }, decideSchedule, evolveSchedule, { contended: () => new ConcurrencyError(subject) });
}
