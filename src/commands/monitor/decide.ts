import { ApiError, notFound, unprocessable } from '../../lib/errors.ts';
import { checkResourceChannels } from '../channel/decide.ts';
import { randomToken } from '../../lib/ids.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import { checkLength, checkRange, checkUrl, emptyAsNone, MAX_NAME_LENGTH } from '../payload-checks.ts';
import { cronError, isTimeZone, nextTick } from '../schedule/cron.ts';
import { dueRun, endOutcome, endRun, nextDeadline, readSignal, runLimit, startRun } from './runs.ts';
import {
  MONITOR_DEFAULTS, SLUG_PATTERN,
  type DownReason, type Monitor, type MonitorEvent, type MonitorInput, type MonitorSpec, type PingRecord, type PingRequest,
} from './types.ts';

/**
 * `slugOwner`: the id of the monitor of the organization that has the input's `slug`
 * now (read by the handler), so a slug stays unique in the organization.
 */
export type MonitorCommand =
  | { type: 'CreateMonitor'; orgId: string; input: MonitorInput & { name: string; schedule_type: 'interval' | 'cron' }; slugOwner?: string | null }
  | { type: 'UpdateMonitor'; input: MonitorInput; slugOwner?: string | null }
  | { type: 'DeleteMonitor' }
  | { type: 'PauseMonitor' }
  | { type: 'ResumeMonitor' }
  /** `slug`: the ping named the monitor by slug (`/ping/<ping_key>/<slug>`); a monitor whose slug changed meanwhile is not found. */
  | { type: 'Ping'; ping: PingRequest; slug?: string }
  /** A deadline's timer fired (the scheduler): `deadlineAt` is the `deadline_at` it was armed for. */
  | { type: 'CheckDeadline'; deadlineAt: string };

export function evolveMonitor(_state: Monitor | null, event: MonitorEvent): Monitor | null {
  switch (event.type) {
    case 'MonitorCreated':
    case 'MonitorUpdated':
    case 'MonitorPaused':
    case 'MonitorResumed':
    case 'MonitorPinged':
    case 'MonitorRestated':
    case 'MonitorWentDown':
      return event.data.monitor;
    case 'MonitorDeleted':
      return null;
    default:
      return unreachable(event);
  }
}

export const INTERVAL_SECONDS = { minimum: 60, maximum: 604_800 } as const;
export const GRACE_SECONDS = { minimum: 0, maximum: 3600 } as const;

/**
 * Every rule of a monitor's spec, whatever path it came by (POST, PUT, sync).
 * `names`: a field's name where the caller calls it otherwise (sync's `grace_seconds`).
 */
export function checkMonitorRules(spec: MonitorSpec, names: Partial<Record<keyof MonitorSpec, string>> = {}): void {
  const name = (field: keyof MonitorSpec) => names[field] ?? field;
  checkLength(spec.name, 'name', MAX_NAME_LENGTH, 1);
  checkRange(spec.interval_seconds, name('interval_seconds'), INTERVAL_SECONDS);
  checkRange(spec.grace_period_seconds, name('grace_period_seconds'), GRACE_SECONDS);
  checkLength(spec.cron_expression, 'cron_expression', 255, 1);
  checkLength(spec.timezone, 'timezone', 64, 1);
  for (const field of ['on_failure_url', 'on_recovery_url'] as const) checkUrl(spec[field], field);
  checkResourceChannels(spec.channels);
  if (spec.schedule_type === 'interval') {
    if (spec.interval_seconds == null) throw unprocessable('interval_seconds is required for an interval monitor', 'interval_seconds');
  } else {
    if (!spec.cron_expression) throw unprocessable('cron_expression is required for a cron monitor', 'cron_expression');
    const err = cronError(spec.cron_expression);
    if (err) throw unprocessable(err, 'cron_expression');
    if (!isTimeZone(spec.timezone)) throw unprocessable(`unknown time zone "${spec.timezone}"`, 'timezone');
  }
  if (spec.slug != null && !SLUG_PATTERN.test(spec.slug)) throw unprocessable('slug takes lower-case letters, digits, "-" and "_" (1 to 100)', 'slug');
  if (spec.min_duration_seconds != null && spec.max_duration_seconds != null && spec.min_duration_seconds >= spec.max_duration_seconds) {
    throw unprocessable('min_duration_seconds must be below max_duration_seconds', 'min_duration_seconds');
  }
}

function checkSlugFree(slug: string | null, slugOwner: string | null | undefined, id: string | null): void {
  if (slug != null && slugOwner && slugOwner !== id) throw unprocessable(`another monitor of the organization has the slug "${slug}"`, 'slug');
}

/** The monitor with its next deadline worked out (see {@link nextDeadline}). */
const withDeadline = (m: Monitor): Monitor => ({ ...m, deadline_at: nextDeadline(m) });

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

/** What a create or update sets: the fields sent, an empty notification URL as none (see `emptyAsNone`). */
const monitorInput = (input: MonitorInput) => strip(emptyAsNone(input, ['on_failure_url', 'on_recovery_url']));

/**
 * A deadline came due: unless a ping, pause or change moved it (the monitor's
 * `deadline_at` is no longer this one), the monitor goes down: `too_long` when a run's
 * limit is reached (every run past its limit then is marked overdue: each is too long
 * once), else `missed`; no event otherwise. The id is derived from the deadline, so two
 * schedulers firing it store one event.
 */
function checkDeadline(deadlineAt: string, m: Monitor | null, meta: CommandMeta): MonitorEvent[] {
  if (!m || m.deadline_at !== deadlineAt || nextDeadline(m) !== deadlineAt) return [];
  const run = dueRun(m.runs, deadlineAt);
  const reason: DownReason = run ? 'too_long' : 'missed';
  const runs = run ? m.runs.map((r) => (!r.overdue && r.limit_at <= deadlineAt ? { ...r, overdue: true } : r)) : m.runs;
  return [{
    type: 'MonitorWentDown',
    id: `${m.id}.down.${deadlineAt}`,
    at: meta.now,
    org_id: m.org_id,
    data: { monitor: { ...m, status: 'down', down_reason: reason, runs, deadline_at: null, updated_at: meta.now }, reason, ...(run ? { run } : {}) },
  }];
}

/**
 * A ping: `/log` records and changes nothing; `/start` opens a run (a new monitor stays
 * new, a down one down); an end closes its run, timed, and is a success (up, the next
 * ping expected from it) or takes the monitor down with the reason. Pings received by
 * two API processes may be decided out of arrival order: the latest one counts.
 */
function decidePing(state: Monitor, request: PingRequest, meta: CommandMeta): MonitorEvent[] {
  const { suffix, rid, ...received } = request;
  const signal = readSignal(suffix, rid);
  if (state.paused || !state.enabled) throw new ApiError(410, 'Monitor is paused or disabled');
  let ping: PingRecord = { ...received, ...signal, duration_ms: null };
  const base = { id: meta.eventId, at: meta.now, org_id: state.org_id };
  const pinged = (monitor: Monitor): MonitorEvent[] => [{ ...base, type: 'MonitorPinged', data: { monitor, ping, previous_status: state.status } }];
  if (ping.kind === 'log') return pinged(state);
  const at = { updated_at: meta.now };
  if (ping.kind === 'start') {
    const run = { rid: ping.rid, ping_id: ping.id, started_at: ping.received_at, limit_at: runLimit(state, Date.parse(ping.received_at), meta), overdue: false };
    return pinged(withDeadline({ ...state, ...at, runs: startRun(state.runs, run) }));
  }
  const { closed, open } = endRun(state.runs, ping.rid);
  if (closed) ping = { ...ping, duration_ms: Math.max(0, Date.parse(ping.received_at) - Date.parse(closed.started_at)) };
  const latest = state.last_ping_at && state.last_ping_at > ping.received_at ? state.last_ping_at : ping.received_at;
  const reason = endOutcome(ping, state, meta);
  if (reason) {
    const monitor: Monitor = { ...state, ...at, status: 'down', down_reason: reason, last_ping_at: latest, runs: open, deadline_at: null };
    return [{ ...base, type: 'MonitorWentDown', data: { monitor, reason, ping } }];
  }
  const e = expectation(state, Date.parse(latest), meta);
  return pinged(withDeadline({
    ...state, ...at, status: 'up', down_reason: null, last_ping_at: latest, next_expected_at: e.next, late_at: e.deadline, runs: open,
  }));
}

export function decideMonitor(command: MonitorCommand, state: Monitor | null, meta: CommandMeta): MonitorEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CheckDeadline') return checkDeadline(command.deadlineAt, state, meta);
  if (command.type === 'CreateMonitor') {
    const spec: MonitorSpec = { ...MONITOR_DEFAULTS, ...monitorInput(command.input), name: command.input.name, schedule_type: command.input.schedule_type };
    checkMonitorRules(spec);
    checkSlugFree(spec.slug, command.slugOwner, null);
    const monitor: Monitor = {
      ...spec,
      id: meta.newId('mon'),
      org_id: command.orgId,
      token: `pm_${randomToken(32)}`,
      status: 'new',
      down_reason: null,
      paused: false,
      last_ping_at: null,
      next_expected_at: null,
      late_at: null,
      runs: [],
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
      const input = monitorInput(command.input);
      const spec: MonitorSpec = { ...state, ...input };
      checkMonitorRules(spec);
      checkSlugFree(spec.slug, command.slugOwner, state.id);
      let monitor: Monitor = { ...state, ...spec, ...at };
      // A new rhythm applies from the last ping on; open runs keep the limit they started with.
      if (monitor.last_ping_at && monitor.status === 'up') {
        const e = expectation(spec, Date.parse(monitor.last_ping_at), meta);
        monitor = { ...monitor, next_expected_at: e.next, late_at: e.deadline };
      }
      return [{ ...base, org_id, type: 'MonitorUpdated', data: { monitor: withDeadline(monitor), changed: Object.keys(input) } }];
    }
    case 'DeleteMonitor':
      return [{ ...base, org_id, type: 'MonitorDeleted', data: { monitor: { ...state, ...at } } }];
    case 'PauseMonitor':
      return [{ ...base, org_id, type: 'MonitorPaused', data: { monitor: { ...state, ...at, paused: true, status: 'paused', down_reason: null, runs: [], deadline_at: null } } }];
    case 'ResumeMonitor': {
      // Resumed monitors wait for their next ping, like new ones: no going down on old silence.
      const status = state.last_ping_at ? 'up' : 'new';
      const e = state.last_ping_at ? expectation(state, meta.nowMs, meta) : null;
      const monitor: Monitor = { ...state, ...at, paused: false, status, down_reason: null, runs: [], next_expected_at: e?.next ?? null, late_at: e?.deadline ?? null };
      return [{ ...base, org_id, type: 'MonitorResumed', data: { monitor: withDeadline(monitor) } }];
    }
    case 'Ping':
      if (command.slug !== undefined && state.slug !== command.slug) throw notFound('Monitor not found');
      return decidePing(state, command.ping, meta);
    default:
      return unreachable(command);
  }
}
