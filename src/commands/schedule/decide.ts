import { createHash } from 'node:crypto';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { checkTaskRules } from '../task/decide.ts';
import { TASK_DEFAULTS } from '../task/types.ts';
import type { CommandMeta } from '../meta.ts';
import { cronError, isTimeZone, nextTick } from './cron.ts';
import { SCHEDULE_DEFAULTS, type Schedule, type ScheduleEvent, type ScheduleInput, type ScheduleSpec } from './types.ts';
import { nameFromUrl } from '../../lib/default-name.ts';

export type ScheduleCommand =
  | { type: 'CreateSchedule'; orgId: string; input: ScheduleInput & { url: string; cron: string } }
  | { type: 'UpdateSchedule'; input: ScheduleInput }
  | { type: 'DeleteSchedule' }
  | { type: 'TriggerSchedule'; callbackUrl: string | null };

export function evolveSchedule(_state: Schedule | null, event: ScheduleEvent): Schedule | null {
  return event.type === 'ScheduleDeleted' ? null : event.data.schedule;
}

export function checkScheduleRules(spec: ScheduleSpec): void {
  const err = cronError(spec.cron);
  if (err) throw unprocessable(err, 'cron');
  if (!isTimeZone(spec.timezone)) throw unprocessable(`unknown time zone "${spec.timezone}" (use an IANA name such as Europe/Berlin)`, 'timezone');
  checkTaskRules({ ...TASK_DEFAULTS, name: spec.name, url: spec.url, expected_status_codes: spec.expected_status_codes }, {});
}

/** The execution id of one tick: the same on every scheduler that fires it. */
export function tickExecutionId(scheduleId: string, tickIso: string): string {
  return `exe_${createHash('sha256').update(`${scheduleId}@${tickIso}`).digest('hex').slice(0, 24)}`;
}

export function nextRunAt(spec: Pick<ScheduleSpec, 'cron' | 'timezone' | 'enabled'>, afterMs: number): string | null {
  return spec.enabled ? nextTick(spec.cron, spec.timezone, afterMs).toISOString() : null;
}

export function decideSchedule(command: ScheduleCommand, state: Schedule | null, meta: CommandMeta): ScheduleEvent {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CreateSchedule') {
    const input = Object.fromEntries(Object.entries(command.input).filter(([, v]) => v !== undefined)) as ScheduleInput;
    const spec: ScheduleSpec = { ...SCHEDULE_DEFAULTS, name: nameFromUrl(command.input.url), ...input, url: command.input.url, cron: command.input.cron };
    checkScheduleRules(spec);
    const schedule: Schedule = {
      ...spec,
      id: meta.newId('sch'),
      org_id: command.orgId,
      created_at: meta.now,
      updated_at: meta.now,
      next_run_at: nextRunAt(spec, meta.nowMs),
    };
    return { ...base, type: 'ScheduleCreated', org_id: command.orgId, data: { schedule } };
  }
  if (!state) throw notFound('Schedule not found');
  const org_id = state.org_id;
  switch (command.type) {
    case 'UpdateSchedule': {
      const input = Object.fromEntries(Object.entries(command.input).filter(([, v]) => v !== undefined)) as ScheduleInput;
      const spec: ScheduleSpec = { ...state, ...input };
      checkScheduleRules(spec);
      const timing = 'cron' in input || 'timezone' in input || 'enabled' in input;
      const schedule: Schedule = {
        ...state,
        ...spec,
        updated_at: meta.now,
        next_run_at: timing ? nextRunAt(spec, meta.nowMs) : state.next_run_at,
      };
      return { ...base, org_id, type: 'ScheduleUpdated', data: { schedule, changed: Object.keys(input) } };
    }
    case 'DeleteSchedule':
      return { ...base, org_id, type: 'ScheduleDeleted', data: { schedule: { ...state, updated_at: meta.now } } };
    case 'TriggerSchedule':
      return {
        ...base,
        org_id,
        type: 'ScheduleTriggered',
        data: { schedule: state, execution: { id: meta.newId('exe'), scheduled_for: meta.now, callback_url: command.callbackUrl } },
      };
    default: {
      const never: never = command;
      throw new Error(`unknown command ${(never as { type: string }).type}`);
    }
  }
}
