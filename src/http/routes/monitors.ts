import { Router } from 'express';
import type { Selectable } from 'kysely';
import { createMonitor, runMonitor, updateMonitor } from '../../commands/monitor/handlers.ts';
import type { Monitor, MonitorInput } from '../../commands/monitor/types.ts';
import type { MonitorsTable } from '../../db/schema.ts';
import { notFound } from '../../lib/errors.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { createMonitorSchema, updateMonitorSchema } from '../schemas/monitor.ts';
import { validate } from '../validate.ts';
import { planLimitFor } from '../plan-limits.ts';
import { limitParam } from './executions.ts';
import { slugOwner, type PingTokens } from '../ping-tokens.ts';
const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

export function monitorRoutes(deps: ApiDeps, rootUrl: () => string, tokens: PingTokens): Router {
  const r = Router();
  const owner = slugOwner(deps.db);
  const resource = (row: Selectable<MonitorsTable>) => ({
    // Resources made before notification channels name none: every channel.
    channels: null,
    ...(row.doc as Record<string, unknown>),
    id: row.id,
    status: row.status,
    down_reason: row.status === 'down' ? row.down_reason : null,
    ping_url: `${rootUrl()}/ping/${row.token}`,
    last_ping_at: iso(row.last_ping_at),
    next_expected_at: iso(row.next_expected_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });
  const load = async (orgId: string, id: string) => {
    const row = await deps.db.selectFrom('monitors').selectAll().where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Monitor not found');
    return row;
  };
  const answer = async (orgId: string, m: Monitor, seq: number) => {
    await deps.reads.wrote(orgId, seq);
    await deps.reads.caughtUp(orgId);
    return resource(await load(orgId, m.id));
  };

  r.get('/monitors', handler(async (req, res) => {
    const rows = await deps.db.selectFrom('monitors').selectAll().where('org_id', '=', req.orgId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    res.json({ data: rows.map(resource) });
  }));
  r.get('/monitors/:id', handler(async (req, res) => void res.json({ data: resource(await load(req.orgId, req.params.id!)) })));
  r.post('/monitors', handler(async (req, res) => {
    const input = validate<MonitorInput & { name: string; schedule_type: 'interval' | 'cron' }>(createMonitorSchema, jsonObject(req));
    const { state, seq } = await createMonitor(deps, req.orgId, input, await planLimitFor(deps, 'monitor', req.orgId), owner);
    tokens.remember(state!.token, { org_id: state!.org_id, id: state!.id });
    res.status(201).json({ data: await answer(req.orgId, state!, seq) });
  }));
  r.put('/monitors/:id', handler(async (req, res) => {
    const input = validate<MonitorInput>(updateMonitorSchema, jsonObject(req));
    const { state, seq } = await updateMonitor(deps, req.orgId, req.params.id!, input, owner);
    res.json({ data: await answer(req.orgId, state!, seq) });
  }));
  r.delete('/monitors/:id', handler(async (req, res) => {
    const { seq } = await runMonitor(deps, req.orgId, req.params.id!, { type: 'DeleteMonitor' });
    await deps.reads.wrote(req.orgId, seq);
    res.status(204).end();
  }));
  for (const [path, type] of [['pause', 'PauseMonitor'], ['resume', 'ResumeMonitor']] as const) {
    r.post(`/monitors/:id/${path}`, handler(async (req, res) => {
      const { state, seq } = await runMonitor(deps, req.orgId, req.params.id!, { type });
      res.json({ data: await answer(req.orgId, state!, seq) });
    }));
  }
  r.get('/monitors/:id/pings', handler(async (req, res) => {
    await load(req.orgId, req.params.id!);
    const rows = await deps.db.selectFrom('pings').selectAll().where('monitor_id', '=', req.params.id!)
      .orderBy('received_at', 'desc').orderBy('id', 'desc').limit(limitParam(req)).execute();
    res.json({ data: rows.map((p) => ({
      id: p.id, received_at: iso(p.received_at), kind: p.kind, exit_status: p.exit_status, rid: p.rid, duration_ms: p.duration_ms,
      method: p.method, source_ip: p.source_ip, user_agent: p.user_agent, body: p.body,
    })) });
  }));
  return r;
}
