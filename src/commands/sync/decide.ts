import { unprocessable } from '../../lib/errors.ts';
import { checkMonitorRules } from '../monitor/decide.ts';
import { MONITOR_DEFAULTS, SLUG_PATTERN, type MonitorSpec } from '../monitor/types.ts';
import { inItem } from '../payload-checks.ts';
import { checkScheduleRules } from '../schedule/decide.ts';
import { SCHEDULE_DEFAULTS, type ScheduleSpec } from '../schedule/types.ts';
import type { HttpMethod } from '../task/types.ts';

export interface SyncInput {
  schedules?: Array<{ key: string; name?: string; url: string; method?: HttpMethod; cron: string; timezone?: string; headers?: Record<string, string>; body?: ScheduleSpec['body'] }>;
  monitors?: Array<{
    key: string; name: string; schedule_type: 'interval' | 'cron'; cron_expression?: string; interval_seconds?: number; grace_seconds?: number; timezone?: string;
    slug?: string; max_duration_seconds?: number; min_duration_seconds?: number;
  }>;
  delete_removed?: boolean;
}

export interface Existing<S> {
  id: string;
  spec: S;
}

export type ScheduleFields = Pick<ScheduleSpec, 'name' | 'url' | 'method' | 'cron' | 'timezone' | 'headers' | 'body'> & { sync_key: string };
export type MonitorFields = Pick<MonitorSpec, 'name' | 'schedule_type' | 'cron_expression' | 'interval_seconds' | 'grace_period_seconds' | 'timezone' | 'max_duration_seconds' | 'min_duration_seconds' | 'slug'> & { sync_key: string };

/** What one declared (or no longer declared) item asks for. */
export type SyncStep<F> =
  | { kind: 'create'; fields: F }
  | { kind: 'update'; id: string; fields: F }
  | { kind: 'unchanged' }
  | { kind: 'delete'; id: string };

export interface SyncPlan {
  schedules: SyncStep<ScheduleFields>[];
  monitors: SyncStep<MonitorFields>[];
  /** The declared item (`monitors[i]`) each monitor step came from; deletes, which no item declares, have -1. */
  monitorIndex: number[];
}

function uniqueKeys(items: Array<{ key: string }>, what: string): void {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (seen.has(item.key)) throw unprocessable(`duplicate key "${item.key}"`, `${what}[${i}].key`);
    seen.add(item.key);
  });
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function steps<F extends { sync_key: string }, S extends { sync_key: string | null }>(wanted: F[], existing: Existing<S>[], deleteRemoved: boolean): SyncStep<F>[] {
  const byKey = new Map(existing.map((e) => [e.spec.sync_key!, e]));
  const out: SyncStep<F>[] = wanted.map((fields) => {
    const have = byKey.get(fields.sync_key);
    if (!have) return { kind: 'create', fields };
    // A field the stored spec predates (absent) is null.
    const changed = Object.entries(fields).some(([k, v]) => !same(v, (have.spec as Record<string, unknown>)[k] ?? null));
    return changed ? { kind: 'update', id: have.id, fields } : { kind: 'unchanged' };
  });
  if (deleteRemoved) {
    const keep = new Set(wanted.map((f) => f.sync_key));
    for (const e of existing) if (!keep.has(e.spec.sync_key!)) out.push({ kind: 'delete', id: e.id });
  }
  return out;
}

/**
 * PUT /sync decided: every declared item is held to its aggregate's rules (the
 * schedule's and the monitor's deciders', the field named with the item's place,
 * `schedules[3].headers.X-Bad`) before anything is written, so an invalid item rejects
 * the whole call; then each item is created, updated or left alone, and with
 * delete_removed the synced ones absent from the call are deleted.
 */
export function decideSync(input: SyncInput, existing: { schedules: Existing<ScheduleSpec>[]; monitors: Existing<MonitorSpec>[] }): SyncPlan {
  const schedules = input.schedules ?? [];
  const monitors = input.monitors ?? [];
  uniqueKeys(schedules, 'schedules');
  uniqueKeys(monitors, 'monitors');
  const wantedSchedules = schedules.map((s, i): ScheduleFields => {
    const fields = { name: s.name ?? s.key, url: s.url, method: s.method ?? 'GET', cron: s.cron, timezone: s.timezone ?? 'UTC', headers: s.headers ?? {}, body: s.body ?? null, sync_key: s.key };
    inItem(`schedules[${i}]`, () => checkScheduleRules({ ...SCHEDULE_DEFAULTS, ...fields }));
    return fields;
  });
  const wantedMonitors = monitors.map((m, i): MonitorFields => {
    const fields = {
      name: m.name,
      schedule_type: m.schedule_type,
      cron_expression: m.cron_expression ?? null,
      interval_seconds: m.interval_seconds ?? null,
      grace_period_seconds: m.grace_seconds ?? 300,
      timezone: m.timezone ?? 'UTC',
      max_duration_seconds: m.max_duration_seconds ?? null,
      min_duration_seconds: m.min_duration_seconds ?? null,
      // A synced monitor's key is its slug (pinged as /ping/<ping_key>/<key>) unless one is given.
      slug: m.slug ?? (SLUG_PATTERN.test(m.key) ? m.key : null),
      sync_key: m.key,
    };
    inItem(`monitors[${i}]`, () => checkMonitorRules({ ...MONITOR_DEFAULTS, ...fields }, { grace_period_seconds: 'grace_seconds' }));
    return fields;
  });
  const deleteRemoved = input.delete_removed === true;
  const monitorSteps = steps(wantedMonitors, existing.monitors, deleteRemoved);
  return {
    schedules: steps(wantedSchedules, existing.schedules, deleteRemoved),
    monitors: monitorSteps,
    monitorIndex: monitorSteps.map((_, i) => (i < wantedMonitors.length ? i : -1)),
  };
}
