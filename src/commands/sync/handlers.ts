import { createMonitor, runMonitor, updateMonitor, type SlugOwner } from '../monitor/handlers.ts';
import { featuresOf, type PlanLimit } from '../plan-rules.ts';
import type { MonitorSpec } from '../monitor/types.ts';
import { unprocessable } from '../../lib/errors.ts';
import { createSchedule, deleteSchedule, updateSchedule } from '../schedule/handlers.ts';
import type { ScheduleSpec } from '../schedule/types.ts';
import type { CommandDeps } from '../execute.ts';
import { decideSync, type Existing, type SyncInput, type SyncPlan, type SyncStep } from './decide.ts';

export type { Existing, SyncInput } from './decide.ts';

export interface Counts {
  created: number;
  updated: number;
  unchanged: number;
  deleted: number;
}

/** Carries out one kind's steps in order, counting them; `seq` = the last stored sequence. */
async function apply<F>(steps: SyncStep<F>[], write: (step: Exclude<SyncStep<F>, { kind: 'unchanged' }>) => Promise<{ seq: number }>): Promise<Counts & { seq: number }> {
  const counts = { created: 0, updated: 0, unchanged: 0, deleted: 0, seq: 0 };
  for (const step of steps) {
    if (step.kind === 'unchanged') counts.unchanged++;
    else {
      counts.seq = Math.max(counts.seq, (await write(step)).seq);
      counts[step.kind === 'create' ? 'created' : step.kind === 'update' ? 'updated' : 'deleted']++;
    }
  }
  return counts;
}

/**
 * PUT /sync: the declared schedules and monitors, keyed by the caller's `key`
 * (`decideSync` checks every item and decides each step), then the steps, each through
 * its aggregate's own command. Repeating a call changes nothing.
 */
export async function sync(
  deps: CommandDeps,
  orgId: string,
  input: SyncInput,
  existing: { schedules: Existing<ScheduleSpec>[]; monitors: Existing<MonitorSpec>[] },
  plans: { schedule: PlanLimit; monitor: PlanLimit },
  slugOwner: SlugOwner,
): Promise<{ schedules: Counts; monitors: Counts; lastSeq: number }> {
  const plan = decideSync(input, existing);
  await checkSlugs(plan, orgId, slugOwner);
  const { seq: s1, ...schedules } = await apply(plan.schedules, (step) =>
    step.kind === 'create' ? createSchedule(deps, orgId, step.fields, plans.schedule)
      : step.kind === 'update' ? updateSchedule(deps, orgId, step.id, step.fields, featuresOf(plans.schedule))
        : deleteSchedule(deps, orgId, step.id));
  const { seq: s2, ...monitors } = await apply(plan.monitors, (step) =>
    step.kind === 'create' ? createMonitor(deps, orgId, step.fields, plans.monitor, slugOwner)
      : step.kind === 'update' ? updateMonitor(deps, orgId, step.id, step.fields, slugOwner)
        : runMonitor(deps, orgId, step.id, { type: 'DeleteMonitor' }));
  return { schedules, monitors, lastSeq: Math.max(s1, s2) };
}

/**
 * A synced monitor's slug must not be another monitor's: one the call declares twice,
 * or one that belongs to a monitor other than the one this item updates, is a 422 on
 * that item before anything is written.
 */
async function checkSlugs(plan: SyncPlan, orgId: string, slugOwner: SlugOwner): Promise<void> {
  const seen = new Set<string>();
  for (const [i, step] of plan.monitors.entries()) {
    if (step.kind !== 'create' && step.kind !== 'update') continue;
    const slug = step.fields.slug;
    if (!slug) continue;
    const owner = await slugOwner(orgId, slug);
    const self = step.kind === 'update' ? step.id : undefined;
    if (seen.has(slug) || (owner && owner !== self)) throw unprocessable(`another monitor of the organization has the slug "${slug}"`, `monitors[${plan.monitorIndex[i]}].slug`);
    seen.add(slug);
  }
}
