/**
 * Heartbeat runs, the Healthchecks way: a `/start` opens a run, the next end (success,
 * `/fail`, `/<exit status>`) closes it and is timed. `?rid=` ties an end to its own
 * start so overlapping runs are timed apart; without it an end closes the latest open
 * start. Pure functions of the monitor's state, used by its decider.
 */
import { badRequest, notFound } from '../../lib/errors.ts';
import type { CommandMeta } from '../meta.ts';
import { MAX_OPEN_RUNS, type DownReason, type Monitor, type MonitorSpec, type OpenRun, type PingKind, type PingRecord } from './types.ts';

const RID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The signal a ping's URL carries: its kind and exit status. `/<n>` above 255 and a
 * `rid` that is not a UUID are 400; a suffix that is no signal names nothing (404).
 */
export function readSignal(suffix: string | null, rid: string | null): { kind: PingKind; exit_status: number | null; rid: string | null } {
  if (rid !== null && !RID.test(rid)) throw badRequest('rid must be a UUID', 'rid');
  const normalRid = rid?.toLowerCase() ?? null;
  if (suffix === null || suffix === '') return { kind: 'success', exit_status: null, rid: normalRid };
  if (suffix === 'start' || suffix === 'fail' || suffix === 'log') return { kind: suffix, exit_status: null, rid: normalRid };
  if (/^[0-9]{1,10}$/.test(suffix)) {
    const status = Number(suffix);
    if (status > 255) throw badRequest('An exit status is 0 to 255');
    return { kind: 'exit', exit_status: status, rid: normalRid };
  }
  throw notFound('Not found');
}

/** What an end says about the job: success, or why the monitor goes down. */
export function endOutcome(ping: Pick<PingRecord, 'kind' | 'exit_status' | 'duration_ms'>, spec: MonitorSpec, meta: Pick<CommandMeta, 'scaleWait'>): DownReason | null {
  if (ping.kind === 'fail') return 'failed';
  if (ping.kind === 'exit' && ping.exit_status !== 0) return 'exit_status';
  // duration_ms is wall-clock time; min_duration_seconds is a wait the service counts (scaled).
  if (spec.min_duration_seconds != null && ping.duration_ms != null && ping.duration_ms < meta.scaleWait(spec.min_duration_seconds * 1000)) return 'too_fast';
  return null;
}

/** A run started at `startedMs` is too long at this time. */
export function runLimit(spec: MonitorSpec, startedMs: number, meta: Pick<CommandMeta, 'scaleWait'>): string {
  return new Date(startedMs + meta.scaleWait((spec.max_duration_seconds ?? spec.grace_period_seconds) * 1000)).toISOString();
}

/**
 * The runs after a start. A start without `rid` replaces an open one without `rid`
 * (nothing tells such runs apart, as in Healthchecks); a start with a `rid` already
 * open restarts that run. Past {@link MAX_OPEN_RUNS}, the oldest is dropped.
 */
export function startRun(runs: OpenRun[], run: OpenRun): OpenRun[] {
  const kept = runs.filter((r) => r.rid !== run.rid);
  return [...kept, run].sort((a, b) => (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : 0)).slice(-MAX_OPEN_RUNS);
}

/** The run an end closes (by `rid`, else the latest open start) and the runs left open. */
export function endRun(runs: OpenRun[], rid: string | null): { closed: OpenRun | null; open: OpenRun[] } {
  const closed = rid !== null ? runs.find((r) => r.rid === rid) : runs.at(-1);
  return closed ? { closed, open: runs.filter((r) => r !== closed) } : { closed: null, open: runs };
}

/** The earliest limit of the runs that can still be too long, if any is reached by `at` (or at all, without `at`). */
export function dueRun(runs: OpenRun[], at?: string): OpenRun | null {
  let first: OpenRun | null = null;
  for (const r of runs) if (!r.overdue && (!first || r.limit_at < first.limit_at)) first = r;
  return first && (at === undefined || first.limit_at <= at) ? first : null;
}

/**
 * When the monitor goes down next without another ping: the earlier of being late
 * (only once it is up) and a run's limit (also before the first ping: a hanging run is
 * caught even on a new monitor). Null while it cannot go down.
 */
export function nextDeadline(m: Pick<Monitor, 'status' | 'late_at' | 'runs' | 'paused' | 'enabled'>): string | null {
  if (m.paused || !m.enabled || (m.status !== 'up' && m.status !== 'new')) return null;
  const late = m.status === 'up' ? m.late_at : null;
  const run = dueRun(m.runs)?.limit_at ?? null;
  if (late && run) return late < run ? late : run;
  return late ?? run;
}


/**
 * The deadline a monitor as an event left it must be watched for, or null: its
 * `deadline_at` while it can still go down at it (the monitor owner arms it, `watch`).
 */
export function armedDeadline(m: Monitor | null): string | null {
  return m && m.deadline_at && nextDeadline(m) === m.deadline_at ? m.deadline_at : null;
}
