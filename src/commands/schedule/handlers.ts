import { type CommandDeps, type Decided } from '../execute.ts';
import { orgAggregate } from '../org-aggregate.ts';
import type { Plan } from '../organization/types.ts';
import { featuresOf, type PlanLimit } from '../plan-rules.ts';
import { decideSchedule, evolveSchedule, type ScheduleCommand } from './decide.ts';
import type { Schedule, ScheduleEvent, ScheduleInput } from './types.ts';

type Result = Decided<Schedule, ScheduleEvent>;

export const scheduleSubject = (orgId: string, id: string) => `evt.${orgId}.schedule.${id}`;

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
export const triggerSchedule = (deps: CommandDeps, orgId: string, id: string, callbackUrl: string | null) =>
  run(deps, orgId, id, { type: 'TriggerSchedule', callbackUrl });

