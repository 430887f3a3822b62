import { Router } from 'express';
import { sql, type Selectable } from 'kysely';
import { runFlowKey } from '../../commands/flow-control/handlers.ts';
import { flowKeyPartition } from '../../commands/partition/partition-of.ts';
import type { FlowControlKeysTable } from '../../db/schema.ts';
import { notFound } from '../../lib/errors.ts';
import { askFlowStats, type KeyLoad } from '../../owners/flow-stats.ts';
import { handler, type ApiDeps } from '../context.ts';

type KeyRow = Pick<Selectable<FlowControlKeysTable>, 'key' | 'parallelism' | 'rate' | 'period' | 'paused'>;

/**
 * The organization's flow-control keys (the contract's "Flow control"): limits and
 * pause from the read models, what waits and runs from the owners' memory, the only
 * place that knows what runs now. A partition whose owner does not answer (none runs,
 * or one is taking over) is counted from the read models: pending and running executions.
 */
export function flowControlRoutes(deps: ApiDeps): Router {
  const r = Router();
  const partitions = deps.config.partitions;

  const rows = (orgId: string, key?: string) => {
    let q = deps.db.selectFrom('flow_control_keys').select(['key', 'parallelism', 'rate', 'period', 'paused']).where('org_id', '=', orgId);
    if (key !== undefined) q = q.where('key', '=', key);
    return q.orderBy('key').execute();
  };

  /** What the read models say the keys of unanswered partitions hold. */
  const storedLoad = async (orgId: string, keys: string[]): Promise<Map<string, KeyLoad>> => {
    const out = new Map<string, KeyLoad>();
    if (!keys.length) return out;
    const { rows: counted } = await sql<{ key: string; waiting: string; in_flight: string }>`
      SELECT t.doc->'flow_control'->>'key' AS key,
        count(*) FILTER (WHERE e.status = 'pending') AS waiting,
        count(*) FILTER (WHERE e.status = 'running') AS in_flight
      FROM executions e JOIN tasks t ON t.id = e.source_id
      WHERE e.org_id = ${orgId} AND e.status IN ('pending', 'running') AND t.doc->'flow_control'->>'key' = ANY(${keys})
      GROUP BY 1`.execute(deps.db);
    for (const c of counted) out.set(c.key, { key: c.key, waiting: Number(c.waiting), in_flight: Number(c.in_flight), paused: false });
    return out;
  };

  const resources = async (orgId: string, stored: KeyRow[]) => {
    const { keys: live, missing } = await askFlowStats(deps.nats, orgId, partitions);
    const unanswered = new Set(missing);
    const fromStore = await storedLoad(orgId, stored.map((k) => k.key).filter((k) => unanswered.has(flowKeyPartition(orgId, k, partitions))));
    return stored.map((k) => {
      const load = live.get(k.key) ?? fromStore.get(k.key);
      return {
        key: k.key,
        parallelism: k.parallelism,
        rate: k.rate,
        period: k.period,
        waiting: load?.waiting ?? 0,
        in_flight: load?.in_flight ?? 0,
        paused: k.paused,
      };
    });
  };

  /** A key paused before any task named it has no limits yet. */
  const one = async (orgId: string, key: string) => {
    const [row] = await rows(orgId, key);
    if (!row) throw notFound('Flow-control key not found');
    return (await resources(orgId, [row]))[0]!;
  };

  r.get('/flow-control', handler(async (req, res) => {
    res.json({ data: await resources(req.orgId, await rows(req.orgId)) });
  }));

  r.get('/flow-control/:key', handler(async (req, res) => {
    res.json({ data: await one(req.orgId, req.params.key!) });
  }));

  for (const [path, type] of [['pause', 'PauseFlowKey'], ['resume', 'ResumeFlowKey']] as const) {
    r.post(`/flow-control/:key/${path}`, handler(async (req, res) => {
      const { seq } = await runFlowKey(deps, req.orgId, req.params.key!, { type });
      if (seq) await deps.reads.wrote(req.orgId, seq);
      await deps.reads.caughtUp(req.orgId);
      res.json({ data: await one(req.orgId, req.params.key!) });
    }));
  }
  return r;
}
