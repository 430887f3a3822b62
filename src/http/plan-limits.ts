import type { Plan } from '../commands/organization/types.ts';
import { isLimited, planLimit, type LimitedKind, type PlanLimit } from '../commands/plan-rules.ts';
import type { ApiDeps } from './context.ts';

/** The organization's resources of one kind in the read model: the start of a plan-limit check (src/commands/quota.ts). */
export async function liveIds(deps: ApiDeps, table: 'schedules' | 'monitors' | 'endpoints', orgId: string): Promise<string[]> {
  // Creates and deletes no longer wait for the projector: the count must include them.
  await deps.reads.caughtUp(orgId);
  const rows = await deps.db.selectFrom(table).select('id').where('org_id', '=', orgId).execute();
  return rows.map((r) => r.id);
}

/** The organization's plan as the directory has it; an organization it does not know counts as Free. */
export async function orgPlan(deps: ApiDeps, orgId: string): Promise<Plan> {
  return (await deps.directory.organization(orgId))?.plan === 'pro' ? 'pro' : 'free';
}

const TABLES = { schedule: 'schedules', monitor: 'monitors', endpoint: 'endpoints' } as const;

/** What a create of a counted kind needs: the plan and, when it counts the kind, the read model's ids of that kind. */
export async function planLimitFor(deps: ApiDeps, kind: LimitedKind, orgId: string): Promise<PlanLimit> {
  const plan = await orgPlan(deps, orgId);
  return planLimit(plan, kind, isLimited(plan, kind) ? await liveIds(deps, TABLES[kind], orgId) : []);
}
