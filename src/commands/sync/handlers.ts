import { checkMonitorRules } from '../monitor/decide.ts';
import { createMonitor, runMonitor } from '../monitor/handlers.ts';
import { featuresOf, type PlanLimit } from '../plan-rules.ts';
import { MONITOR_DEFAULTS, type MonitorSpec } from '../monitor/types.ts';
import { checkScheduleRules } from '../schedule/decide.ts';
import { createSchedule, deleteSchedule, updateSchedule } from '../schedule/handlers.ts';
import { SCHEDULE_DEFAULTS, type ScheduleSpec } from '../schedule/types.ts';
import { ApiError, unprocessable } from '../../lib/errors.ts';
import type { CommandDeps } from '../execute.ts';
import type { HttpMethod } from '../task/types.ts';

export interface SyncInput {
  schedules?: Array<{ key: string; name?: string; url: string; method?: HttpMethod; cron: string; timezone?: string; headers?: Record<string, string>; body?: ScheduleSpec['body'] }>;
  monitors?: Array<{ key: string; name: string; schedule_type: 'interval' | 'cron'; cron_expression?: string; interval_seconds?: number; grace_seconds?: number; timezone?: string }>;
  delete_removed?: boolean;
}

export interface Existing<S> {
  id: string;
  spec: S;
}

export interface Counts {
  created: number;
  updated: number;
  unchanged: number;
  deleted: number;
}

/** Re-raises a rule break with the item's place in the call, e.g. `schedules[3].cron`. */
function at<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ApiError) throw new ApiError(err.status, err.message, err.field ? `${prefix}.${err.field}` : prefix);
    throw err;
  }
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function uniqueKeys(items: Array<{ key: string }>, what: string): void {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (seen.has(item.key)) throw unprocessable(`duplicate key "${item.key}"`, `${what}[${i}].key`);
    seen.add(item.key);
  });
}

/**
 * PUT /sync: the declared schedules and monitors, keyed by the caller's `key`. Every
 * item is checked before anything is written, so an invalid item rejects the whole
 * call; then each item is created, updated or left alone, and with delete_removed
 * the synced ones absent from the call are deleted. Repeating a call changes nothing.
 */
export async function sync(
  deps: CommandDeps,
  orgId: string,
  input: SyncInput,
  existing: { schedules: Existing<ScheduleSpec>[]; monitors: Existing<MonitorSpec>[] },
  plans: { schedule: PlanLimit; monitor: PlanLimit },
): Promise<{ schedules: Counts; monitors: Counts; lastSeq: number }> {
  const schedules = input.schedules ?? [];
  const monitors = input.monitors ?? [];
  uniqueKeys(schedules, 'schedules');
  uniqueKeys(monitors, 'monitors');
  const wantedSchedules = schedules.map((s, i) => {
    const fields = { name: s.name ?? s.key, url: s.url, method: s.method ?? 'GET', cron: s.cron, timezone: s.timezone ?? 'UTC', headers: s.headers ?? {}, body: s.body ?? null, sync_key: s.key };
    at(`schedules[${i}]`, () => checkScheduleRules({ ...SCHEDULE_DEFAULTS, ...fields }));
    return fields;
  });
  const wantedMonitors = monitors.map((m, i) => {
    const fields = {
      name: m.name,
      schedule_type: m.schedule_type,
      cron_expression: m.cron_expression ?? null,
      interval_seconds: m.interval_seconds ?? null,
      grace_period_seconds: m.grace_seconds ?? 300,
      timezone: m.timezone ?? 'UTC',
      sync_key: m.key,
    };
    at(`monitors[${i}]`, () => checkMonitorRules({ ...MONITOR_DEFAULTS, ...fields }));
    return fields;
  });

  let lastSeq = 0;
  const track = (r: { seq: number }) => void (lastSeq = Math.max(lastSeq, r.seq));
  const sc: Counts = { created: 0, updated: 0, unchanged: 0, deleted: 0 };
  const bySchedKey = new Map(existing.schedules.map((e) => [e.spec.sync_key!, e]));
  for (const want of wantedSchedules) {
    const have = bySchedKey.get(want.sync_key);
    if (!have) {
      track(await createSchedule(deps, orgId, want, plans.schedule));
      sc.created++;
    } else if (Object.entries(want).some(([k, v]) => !same(v, (have.spec as unknown as Record<string, unknown>)[k]))) {
      track(await updateSchedule(deps, orgId, have.id, want, featuresOf(plans.schedule)));
      sc.updated++;
    } else sc.unchanged++;
  }
  const mc: Counts = { created: 0, updated: 0, unchanged: 0, deleted: 0 };
  const byMonKey = new Map(existing.monitors.map((e) => [e.spec.sync_key!, e]));
  for (const want of wantedMonitors) {
    const have = byMonKey.get(want.sync_key);
    if (!have) {
      track(await createMonitor(deps, orgId, want, plans.monitor));
      mc.created++;
    } else if (Object.entries(want).some(([k, v]) => !same(v, (have.spec as unknown as Record<string, unknown>)[k]))) {
      track(await runMonitor(deps, orgId, have.id, { type: 'UpdateMonitor', input: want }));
      mc.updated++;
    } else mc.unchanged++;
  }
  if (input.delete_removed) {
    const keepS = new Set(wantedSchedules.map((s) => s.sync_key));
    for (const e of existing.schedules) {
      if (!keepS.has(e.spec.sync_key!)) {
        track(await deleteSchedule(deps, orgId, e.id));
        sc.deleted++;
      }
    }
    const keepM = new Set(wantedMonitors.map((m) => m.sync_key));
    for (const e of existing.monitors) {
      if (!keepM.has(e.spec.sync_key!)) {
        track(await runMonitor(deps, orgId, e.id, { type: 'DeleteMonitor' }));
        mc.deleted++;
      }
    }
  }
  return { schedules: sc, monitors: mc, lastSeq };
}
