import { createHash } from 'node:crypto';
import { checkResourceChannels } from '../channel/decide.ts';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { checkLength, checkRequest, checkUrl, MAX_NAME_LENGTH, MAX_SCRIPT_LENGTH } from '../payload-checks.ts';
import { checkStatusCodes } from '../task/decide.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { checkPlanFeatures } from '../plan-rules.ts';
import { cronError, isTimeZone, nextTick } from './cron.ts';
import { SCHEDULE_DEFAULTS, type Schedule, type ScheduleEvent, type ScheduleInput, type ScheduleSpec } from './types.ts';
import { nameFromUrl } from '../../lib/default-name.ts';

export type ScheduleCommand =
  | { type: 'CreateSchedule'; orgId: string; plan: Plan; input: ScheduleInput & { url: string; cron: string } }
  | { type: 'UpdateSchedule'; plan: Plan; input: ScheduleInput }
  | { type: 'DeleteSchedule' }
  | { type: 'TriggerSchedule'; callbackUrl: string | null }
  /** A tick's timer fired (the scheduler): `tickAt` is the `next_run_at` it was armed for. */
  | { type: 'RecordTick'; tickAt: string };

export function evolveSchedule(_state: Schedule | null, event: ScheduleEvent): Schedule | null {
  switch (event.type) {
    case 'ScheduleCreated':
    case 'ScheduleUpdated':
    case 'ScheduleTriggered':
    case 'ScheduleTicked':
      return event.data.schedule;
    case 'ScheduleDeleted':
      return null;
    default:
      return unreachable(event);
  }
}

/** Every rule of a schedule's spec, whatever path it came by (POST, PUT, sync). */
export function checkScheduleRules(spec: ScheduleSpec): void {
  checkLength(spec.cron, 'cron', 255, 1);
  checkLength(spec.timezone, 'timezone', 64, 1);
  const err = cronError(spec.cron);
  if (err) throw unprocessable(err, 'cron');
  if (!isTimeZone(spec.timezone)) throw unprocessable(`unknown time zone "${spec.timezone}" (use an IANA name such as Europe/Berlin)`, 'timezone');
  checkLength(spec.name, 'name', MAX_NAME_LENGTH, 1);
  checkResourceChannels(spec.channels);
  checkRequest(spec);
  checkStatusCodes(spec.expected_status_codes);
  checkLength(spec.script, 'script', MAX_SCRIPT_LENGTH);
}

/** The execution id of one tick: the same on every scheduler that fires it. */
export function tickExecutionId(scheduleId: string, tickIso: string): string {
  return `exe_${createHash('sha256').update(`${scheduleId}@${tickIso}`).digest('hex').slice(0, 24)}`;
}

export function nextRunAt(spec: Pick<ScheduleSpec, 'cron' | 'timezone' | 'enabled'>, afterMs: number): string | null {
  return spec.enabled ? nextTick(spec.cron, spec.timezone, afterMs).toISOString() : null;
}

/**
 * A due tick becomes `ScheduleTicked`: its id is derived from the tick, so two
 * schedulers firing it store one event. A tick that is no longer the schedule's next
 * one (updated, disabled, deleted, or recorded already) makes no event. The next
 * tick counts from now, so ticks missed while the service was down run once.
 */
function recordTick(tickAt: string, state: Schedule | null, meta: CommandMeta): ScheduleEvent[] {
  if (!state || !state.enabled || state.next_run_at !== tickAt) return [];
  const next = nextRunAt(state, Math.max(meta.nowMs, Date.parse(tickAt)))!;
  return [{
    type: 'ScheduleTicked',
    id: `${state.id}.tick.${tickAt}`,
    at: meta.now,
    org_id: state.org_id,
    data: {
      schedule: { ...state, next_run_at: next },
      execution: { id: tickExecutionId(state.id, tickAt), scheduled_for: tickAt, callback_url: null },
      next_run_at: next,
    },
  }];
}

export function decideSchedule(command: ScheduleCommand, state: Schedule | null, meta: CommandMeta): ScheduleEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  // Before anything else, "not found" included: a refused feature answers the same whatever the schedule.
  if (command.type === 'CreateSchedule' || command.type === 'UpdateSchedule') checkPlanFeatures(command.plan, command.input);
  if (command.type === 'RecordTick') return recordTick(command.tickAt, state, meta);
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
    return [{ ...base, type: 'ScheduleCreated', org_id: command.orgId, data: { schedule } }];
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
      return [{ ...base, org_id, type: 'ScheduleUpdated', data: { schedule, changed: Object.keys(input) } }];
    }
    case 'DeleteSchedule':
      return [{ ...base, org_id, type: 'ScheduleDeleted', data: { schedule: { ...state, updated_at: meta.now } } }];
    case 'TriggerSchedule':
      checkUrl(command.callbackUrl, 'callback_url');
      return [{
        ...base,
        org_id,
        type: 'ScheduleTriggered',
        data: { schedule: state, execution: { id: meta.newId('exe'), scheduled_for: meta.now, callback_url: command.callbackUrl } },
      }];
    default:
      return unreachable(command);
  }
}
