import { Router } from 'express';
import type { MonitorSpec } from '../../commands/monitor/types.ts';
import type { ScheduleSpec } from '../../commands/schedule/types.ts';
import { planLimit } from '../../commands/plan-rules.ts';
import { sync, type SyncInput } from '../../commands/sync/handlers.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { syncSchema } from '../schemas/sync.ts';
import { orgPlan } from '../plan-limits.ts';
import { validate } from '../validate.ts';
import { slugOwner } from '../ping-tokens.ts';

export function syncRoutes(deps: ApiDeps): Router {
  const r = Router();
  r.put('/sync', handler(async (req, res) => {
    const input = validate<SyncInput>(syncSchema, jsonObject(req));
    await deps.reads.caughtUp(req.orgId);
    const [schedRows, monRows] = await Promise.all([
      deps.db.selectFrom('schedules').select(['id', 'doc']).where('org_id', '=', req.orgId).execute(),
      deps.db.selectFrom('monitors').select(['id', 'doc']).where('org_id', '=', req.orgId).execute(),
    ]);
    const synced = <S>(rows: Array<{ id: string; doc: unknown }>) =>
      rows.filter((r) => (r.doc as { sync_key?: string | null }).sync_key).map((r) => ({ id: r.id, spec: r.doc as S }));
    const plan = await orgPlan(deps, req.orgId);
    const result = await sync(
      deps,
      req.orgId,
      input,
      { schedules: synced<ScheduleSpec>(schedRows), monitors: synced<MonitorSpec>(monRows) },
      { schedule: planLimit(plan, 'schedule', schedRows.map((r) => r.id)), monitor: planLimit(plan, 'monitor', monRows.map((r) => r.id)) },
      slugOwner(deps.db),
    );
    await deps.reads.wrote(req.orgId, result.lastSeq);
    res.json({ data: { schedules: result.schedules, monitors: result.monitors } });
  }));
  return r;
}
