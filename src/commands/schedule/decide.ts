import { createHash } from 'node:crypto';
import { checkResourceChannels } from '../channel/decide.ts';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { checkLength, checkRequest, checkUrl, emptyAsNone, MAX_NAME_LENGTH, MAX_SCRIPT_LENGTH } from '../payload-checks.ts';
import { checkStatusCodes } from '../task/decide.ts';
import type { RetryIds } from '../task/types.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { checkPlanFeatures } from '../plan-rules.ts';
import { cronError, isTimeZone, nextTick, ticksAfter } from './cron.ts';
import { SCHEDULE_DEFAULTS, type Schedule, type ScheduleEvent, type ScheduleInput, type ScheduleSpec } from './types.ts';
import { nameFromUrl } from '../../lib/default-name.ts';
import { NO_STREAK, stepStreak, type FinalResult } from '../destination-health.ts';

export type ScheduleCommand =
  | { type: 'CreateSchedule'; orgId: string; plan: Plan; input: ScheduleInput & { url: string; cron: string } }
  | { type: 'UpdateSchedule'; plan: Plan; input: ScheduleInput }
  | { type: 'DeleteSchedule' }
  /** `ids`, `sourceSeq`: as `TriggerTask`'s (a bulk job's retry, decided for a commit outside the schedule's subject). */
  | { type: 'TriggerSchedule'; callbackUrl: string | null; retryOf?: string; ids?: RetryIds; sourceSeq?: number }
  /** A tick's timer fired (the scheduler): `tickAt` is the `next_run_at` it was armed for. */
  | { type: 'RecordTick'; tickAt: string }
  /** Destination health: one of its executions ended for good (the counting reader, `src/notifier/health.ts`). */
  | { type: 'CountResult'; result: FinalResult };

export function evolveSchedule(_state: Schedule | null, event: ScheduleEvent): Schedule | null {
  switch (event.type) {
    case 'ScheduleCreated':
    case 'ScheduleUpdated':
    case 'ScheduleTriggered':
    case 'ScheduleTicked':
    case 'ScheduleTicksMissed':
    case 'ScheduleFailureCounted':
    case 'ScheduleFailuresReset':
    case 'ScheduleDisabled':
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

/** A missed tick later than this never runs, whatever the schedule's interval (the contract's "missed ticks"). */
export const MISSED_TICK_RUNS_WITHIN_MS = 3_600_000;
/** Skipped ticks counted in one outage at most: a per-second schedule down for days counts this many. */
const MAX_COUNTED_MISSES = 100_000;

/**
 * The tick to run when `tickMs` (the armed one) is recorded at `nowMs`: the latest tick
 * due by now, and how many before it (from the armed one on) are skipped. Every tick
 * but the latest has its next one due too, so it is a whole interval late or more.
 */
function latestDueTick(spec: Pick<ScheduleSpec, 'cron' | 'timezone'>, tickMs: number, nowMs: number): { latestMs: number; skipped: number } {
  let latestMs = tickMs;
  let skipped = 0;
  for (const t of ticksAfter(spec.cron, spec.timezone, tickMs)) {
    if (t > nowMs) return { latestMs, skipped };
    latestMs = t;
    if (++skipped >= MAX_COUNTED_MISSES) break;
  }
  // Too many to count: the latest is found from an hour before now (any older one is skipped anyway).
  for (const t of ticksAfter(spec.cron, spec.timezone, Math.max(latestMs, nowMs - MISSED_TICK_RUNS_WITHIN_MS))) {
    if (t > nowMs) break;
    latestMs = t;
  }
  return { latestMs, skipped };
}

/**
 * A due tick becomes `ScheduleTicked`: its id is derived from the tick, so two
 * schedulers firing it store one event. A tick that is no longer the schedule's next
 * one (updated, disabled, deleted, or recorded already) makes no event.
 *
 * Missed ticks (the contract): recorded late (a restart, a takeover, an outage), only
 * the latest tick due by now runs, under its own `scheduled_for`, if it is less than
 * an hour late (it is less than an interval late by being the latest); the ones
 * before it are skipped and counted in `missed_ticks`. Past the hour, every one is
 * skipped (`ScheduleTicksMissed`). The next tick is the first after now.
 */
function recordTick(tickAt: string, state: Schedule | null, meta: CommandMeta): ScheduleEvent[] {
  if (!state || !state.enabled || state.next_run_at !== tickAt) return [];
  const { latestMs, skipped } = latestDueTick(state, Date.parse(tickAt), meta.nowMs);
  const tooLate = meta.nowMs - latestMs >= MISSED_TICK_RUNS_WITHIN_MS;
  const missed = skipped + (tooLate ? 1 : 0);
  const next = nextRunAt(state, Math.max(meta.nowMs, latestMs))!;
  const schedule: Schedule = { ...state, next_run_at: next, ...(missed ? { missed_ticks: (state.missed_ticks ?? 0) + missed } : {}) };
  const base = { at: meta.now, org_id: state.org_id };
  if (tooLate) return [{ ...base, type: 'ScheduleTicksMissed', id: `${state.id}.missed.${tickAt}`, data: { schedule, missed, next_run_at: next } }];
  const runAt = new Date(latestMs).toISOString();
  return [{
    ...base,
    type: 'ScheduleTicked',
    id: `${state.id}.tick.${runAt}`,
    data: {
      schedule,
      execution: { id: tickExecutionId(state.id, runAt), scheduled_for: runAt, callback_url: null },
      next_run_at: next,
      ...(missed ? { missed } : {}),
    },
  }];
}

/**
 * Destination health (CONTRACT.md): a final result of one of its executions counted,
 * once (`stepStreak` passes over a result at or below `health.counted_seq`). A
 * schedule turned off (by its owner or by this rule) counts nothing. The failure that
 * makes the run long and frequent enough turns it off: `enabled: false`,
 * `disabled_reason: "failing"`, no next tick.
 */
function countResult(result: FinalResult, state: Schedule | null, meta: CommandMeta): ScheduleEvent[] {
  if (!state || !state.enabled) return [];
  const step = stepStreak(state.health ?? NO_STREAK, result);
  if (!step) return [];
  const base = { at: meta.now, org_id: state.org_id, id: `${state.id}.health.${result.executionId}` };
  const execution_id = result.executionId;
  switch (step.kind) {
    case 'counted':
      return [{ ...base, type: 'ScheduleFailureCounted', data: { schedule: { ...state, health: step.streak }, execution_id } }];
    case 'reset':
      return [{ ...base, type: 'ScheduleFailuresReset', data: { schedule: { ...state, health: step.streak }, execution_id } }];
    case 'disable': {
      const schedule: Schedule = { ...state, health: step.streak, enabled: false, disabled_reason: 'failing', next_run_at: null, updated_at: meta.now };
      return [{ ...base, type: 'ScheduleDisabled', data: { schedule, execution_id, reason: 'failing', ...(result.run ? { execution: result.run } : {}) } }];
    }
    default:
      return unreachable(step);
  }
}

/** A schedule's fields whose empty text means none (see `emptyAsNone`): any 2xx, no script. */
const SCHEDULE_EMPTY_AS_NONE = ['expected_status_codes', 'script'] as const;

export function decideSchedule(command: ScheduleCommand, state: Schedule | null, meta: CommandMeta): ScheduleEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CreateSchedule' || command.type === 'UpdateSchedule') {
    command = { ...command, input: emptyAsNone(command.input, SCHEDULE_EMPTY_AS_NONE) } as typeof command;
    // Before anything else, "not found" included: a refused feature answers the same whatever the schedule.
    checkPlanFeatures(command.plan, command.input);
  }
  if (command.type === 'RecordTick') return recordTick(command.tickAt, state, meta);
  if (command.type === 'CountResult') return countResult(command.result, state, meta);
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
      // Turned on again: whatever turned it off is over, and its failures are counted afresh.
      const revived = input.enabled === true && !state.enabled ? { disabled_reason: null, health: { ...NO_STREAK, counted_seq: state.health?.counted_seq ?? 0 } } : {};
      const schedule: Schedule = {
        ...state,
        ...spec,
        ...revived,
        updated_at: meta.now,
        next_run_at: timing ? nextRunAt(spec, meta.nowMs) : state.next_run_at,
      };
      return [{ ...base, org_id, type: 'ScheduleUpdated', data: { schedule, changed: Object.keys(input) } }];
    }
    case 'DeleteSchedule':
      return [{ ...base, org_id, type: 'ScheduleDeleted', data: { schedule: { ...state, updated_at: meta.now } } }];
    case 'TriggerSchedule': {
      // An empty one is none: the schedule's own callback applies.
      const callbackUrl = command.callbackUrl || null;
      checkUrl(callbackUrl, 'callback_url');
      return [{
        ...base,
        ...(command.ids ? { id: command.ids.eventId } : {}),
        org_id,
        type: 'ScheduleTriggered',
        data: {
          schedule: state, execution: { id: command.ids?.executionId ?? meta.newId('exe'), scheduled_for: meta.now, callback_url: callbackUrl },
          ...(command.retryOf ? { retry_of: command.retryOf } : {}), ...(command.sourceSeq !== undefined ? { source_seq: command.sourceSeq } : {}),
        },
      }];
    }
    default:
      return unreachable(command);
  }
}
