import type { ApiDeps } from './context.ts';

/** The organization's resources of one kind in the read model: the start of a plan-limit check (src/commands/quota.ts). */
export async function liveIds(deps: ApiDeps, table: 'schedules' | 'monitors' | 'endpoints', orgId: string): Promise<string[]> {
  const rows = await deps.db.selectFrom(table).select('id').where('org_id', '=', orgId).execute();
  return rows.map((r) => r.id);
}
