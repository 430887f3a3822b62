import { ApiError, notFound, unprocessable } from '../../lib/errors.ts';
import { randomToken } from '../../lib/ids.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import { cronError, isTimeZone, nextTick } from '../schedule/cron.ts';
import { MONITOR_DEFAULTS, type Monitor, type MonitorEvent, type MonitorInput, type MonitorSpec, type PingRecord } from './types.ts';

export type MonitorCommand =
  | { type: 'CreateMonitor'; orgId: string; input: MonitorInput & { name: string; schedule_type: 'interval' | 'cron' } }
  | { type: 'UpdateMonitor'; input: MonitorInput }
  | { type: 'DeleteMonitor' }
  | { type: 'PauseMonitor' }
  | { type: 'ResumeMonitor' }
  | { type: 'Ping'; ping: PingRecord }
  /** A deadline's timer fired (the scheduler): `deadlineAt` is the `deadline_at` it was armed for. */
  | { type: 'CheckDeadline'; deadlineAt: string };

export function evolveMonitor(_state: Monitor | null, event: MonitorEvent): Monitor | null {
  switch (event.type) {
    case 'MonitorCreated':
    case 'MonitorUpdated':
    case 'MonitorPaused':
    case 'MonitorResumed':
    case 'MonitorPinged':
    case 'MonitorWentDown':
      return event.data.monitor;
    case 'MonitorDeleted':
      return null;
    default:
      return unreachable(event);
  }
}

export function checkMonitorRules(spec: MonitorSpec): void {
  if (spec.schedule_type === 'interval') {
    if (spec.interval_seconds == null) throw unprocessable('interval_seconds is required for an interval monitor', 'interval_seconds');
  } else {
    if (!spec.cron_expression) throw unprocessable('cron_expression is required for a cron monitor', 'cron_expression');
    const err = cronError(spec.cron_expression);
    if (err) throw unprocessable(err, 'cron_expression');
    if (!isTimeZone(spec.timezone)) throw unprocessable(`unknown time zone "${spec.timezone}"`, 'timezone');
  }
}

/**
 * When the next ping is expected after one at `fromMs`, and when the monitor goes
 * down without it. Intervals and grace are service-counted waits (scaled); cron
 * ticks are wall-clock instants.
 */
export function expectation(spec: MonitorSpec, fromMs: number, meta: Pick<CommandMeta, 'scaleWait'>): { next: string; deadline: string } {
  const next = spec.schedule_type === 'interval'
    ? fromMs + meta.scaleWait(spec.interval_seconds! * 1000)
    : nextTick(spec.cron_expression!, spec.timezone, fromMs).getTime();
  return { next: new Date(next).toISOString(), deadline: new Date(next + meta.scaleWait(spec.grace_period_seconds * 1000)).toISOString() };
}

const strip = <T extends object>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/**
 * A deadline came due: unless a ping, pause or change moved it (the monitor's
 * `deadline_at` is no longer this one), the monitor goes down; else no event. The
 * id is derived from the deadline, so two schedulers firing it store one event.
 */
function checkDeadline(deadlineAt: string, m: Monitor | null, meta: CommandMeta): MonitorEvent[] {
  if (!m || m.paused || !m.enabled || m.status !== 'up' || m.deadline_at !== deadlineAt) return [];
  return [{
    type: 'MonitorWentDown',
    id: `${m.id}.down.${deadlineAt}`,
    at: meta.now,
    org_id: m.org_id,
    data: { monitor: { ...m, status: 'down', deadline_at: null, updated_at: meta.now }, reason: 'missed' },
  }];
}

export function decideMonitor(command: MonitorCommand, state: Monitor | null, meta: CommandMeta): MonitorEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CheckDeadline') return checkDeadline(command.deadlineAt, state, meta);
  if (command.type === 'CreateMonitor') {
    const spec: MonitorSpec = { ...MONITOR_DEFAULTS, ...strip(command.input), name: command.input.name, schedule_type: command.input.schedule_type };
    checkMonitorRules(spec);
    const monitor: Monitor = {
      ...spec,
      id: meta.newId('mon'),
      org_id: command.orgId,
      token: `pm_${randomToken(32)}`,
      status: 'new',
      paused: false,
      last_ping_at: null,
      next_expected_at: null,
      deadline_at: null,
      created_at: meta.now,
      updated_at: meta.now,
    };
    return [{ ...base, type: 'MonitorCreated', org_id: command.orgId, data: { monitor } }];
  }
  if (!state) throw notFound('Monitor not found');
  const org_id = state.org_id;
  const at = { updated_at: meta.now };
  switch (command.type) {
    case 'UpdateMonitor': {
      const input = strip(command.input);
      const spec: MonitorSpec = { ...state, ...input };
      checkMonitorRules(spec);
      let monitor: Monitor = { ...state, ...spec, ...at };
      // A new rhythm applies from the last ping on.
      if (monitor.last_ping_at && monitor.status === 'up') {
        const e = expectation(spec, Date.parse(monitor.last_ping_at), meta);
        monitor = { ...monitor, next_expected_at: e.next, deadline_at: e.deadline };
      }
      return [{ ...base, org_id, type: 'MonitorUpdated', data: { monitor, changed: Object.keys(input) } }];
    }
    case 'DeleteMonitor':
      return [{ ...base, org_id, type: 'MonitorDeleted', data: { monitor: { ...state, ...at } } }];
    case 'PauseMonitor':
      return [{ ...base, org_id, type: 'MonitorPaused', data: { monitor: { ...state, ...at, paused: true, status: 'paused', deadline_at: null } } }];
    case 'ResumeMonitor': {
      // Resumed monitors wait for their next ping, like new ones: no going down on old silence.
      const status = state.last_ping_at ? 'up' : 'new';
      const e = state.last_ping_at ? expectation(state, meta.nowMs, meta) : null;
      return [{
        ...base,
        org_id,
        type: 'MonitorResumed',
        data: { monitor: { ...state, ...at, paused: false, status, next_expected_at: e?.next ?? null, deadline_at: e?.deadline ?? null } },
      }];
    }
    case 'Ping': {
      if (state.paused || !state.enabled) throw new ApiError(410, 'Monitor is paused or disabled');
      const ping = command.ping;
      // Pings received by two API processes may be decided out of arrival order: the latest one counts.
      const latest = state.last_ping_at && state.last_ping_at > ping.received_at ? state.last_ping_at : ping.received_at;
      if (ping.kind === 'fail') {
        return [{ ...base, org_id, type: 'MonitorWentDown', data: { monitor: { ...state, ...at, status: 'down', last_ping_at: latest, deadline_at: null }, reason: 'fail_signal', ping } }];
      }
      const e = expectation(state, Date.parse(latest), meta);
      const monitor: Monitor = { ...state, ...at, status: 'up', last_ping_at: latest, next_expected_at: e.next, deadline_at: e.deadline };
      return [{ ...base, org_id, type: 'MonitorPinged', data: { monitor, ping, previous_status: state.status } }];
    }
    default:
      return unreachable(command);
  }
}
