import { ID_PATTERN } from '../../lib/ids.ts';
import { notFound } from '../../lib/errors.ts';
import { reserveSlot, type PlanLimit } from '../quota.ts';
import { commandMeta, execute, type CommandDeps, type Decided } from '../execute.ts';
import { decideSchedule, evolveSchedule, type ScheduleCommand } from './decide.ts';
import type { Schedule, ScheduleEvent, ScheduleInput } from './types.ts';

type Result = Decided<Schedule, ScheduleEvent>;

export const scheduleSubject = (orgId: string, id: string) => `evt.${orgId}.schedule.${id}`;

function run(deps: CommandDeps, orgId: string, id: string, command: ScheduleCommand): Promise<Result> {
  if (!ID_PATTERN.test(id) || !id.startsWith('sch_')) throw notFound('Schedule not found');
  return execute(deps, scheduleSubject(orgId, id), command, decideSchedule, (s, e) => {
    const next = evolveSchedule(s, e);
    return next && next.org_id === orgId ? next : null;
  });
}

/** `plan.live` lists the organization's schedules in the read model, for the Free plan's limit. */
export async function createSchedule(
  deps: CommandDeps,
  orgId: string,
  input: ScheduleInput & { url: string; cron: string },
  plan: PlanLimit,
): Promise<Result> {
  const event = decideSchedule({ type: 'CreateSchedule', orgId, input }, null, commandMeta(deps.clock));
  const schedule = evolveSchedule(null, event)!;
  await reserveSlot(deps, orgId, 'schedule', plan, schedule.id, async (id) => {
    const last = await deps.store.last<ScheduleEvent>(scheduleSubject(orgId, id));
    return last ? evolveSchedule(null, last.event) !== null : null;
  });
  const seq = await deps.store.append(scheduleSubject(orgId, schedule.id), event, 0);
  return { event, state: schedule, seq };
}

export const updateSchedule = (deps: CommandDeps, orgId: string, id: string, input: ScheduleInput) =>
  run(deps, orgId, id, { type: 'UpdateSchedule', input });
export const deleteSchedule = (deps: CommandDeps, orgId: string, id: string) => run(deps, orgId, id, { type: 'DeleteSchedule' });
export const triggerSchedule = (deps: CommandDeps, orgId: string, id: string, callbackUrl: string | null) =>
  run(deps, orgId, id, { type: 'TriggerSchedule', callbackUrl });
