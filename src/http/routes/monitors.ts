import { Router, type Request } from 'express';
import type { Selectable } from 'kysely';
import { createMonitor, pingMonitor, runMonitor } from '../../commands/monitor/handlers.ts';
import type { Monitor, MonitorInput } from '../../commands/monitor/types.ts';
import type { MonitorsTable } from '../../db/schema.ts';
import { ApiError, notFound } from '../../lib/errors.ts';
import { storableText } from '../../lib/input-checks.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { createMonitorSchema, updateMonitorSchema } from '../schemas/monitor.ts';
import { rawBody } from '../request-body.ts';
import { validate } from '../validate.ts';
import { planLimitFor } from '../plan-limits.ts';
import { limitParam } from './executions.ts';
import { createPingTokens } from '../ping-tokens.ts';

const PING_BODY_BYTES = 10 * 1024;
const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

export function monitorRoutes(deps: ApiDeps, rootUrl: () => string): Router {
  const r = Router();
  const resource = (row: Selectable<MonitorsTable>) => ({
    ...(row.doc as Record<string, unknown>),
    id: row.id,
    status: row.status,
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
    const { state, seq } = await createMonitor(deps, req.orgId, input, await planLimitFor(deps, 'monitor', req.orgId));
    res.status(201).json({ data: await answer(req.orgId, state!, seq) });
  }));
  r.put('/monitors/:id', handler(async (req, res) => {
    const input = validate<MonitorInput>(updateMonitorSchema, jsonObject(req));
    const { state, seq } = await runMonitor(deps, req.orgId, req.params.id!, { type: 'UpdateMonitor', input });
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
    res.json({ data: rows.map((p) => ({ id: p.id, received_at: iso(p.received_at), kind: p.kind, method: p.method, source_ip: p.source_ip, user_agent: p.user_agent, body: p.body })) });
  }));
  return r;
}

/** `{root}/ping/<token>` and `/ping/<token>/fail`, GET or POST, no API key: the token is the credential. */
export function pingRoutes(deps: ApiDeps): Router {
  const r = Router();
  const raw = rawBody();
  const tokens = createPingTokens(deps.db);
  const ping = (kind: 'ping' | 'fail') => handler(async (req, res) => {
    const token = req.params.token!;
    const target = await tokens.find(token);
    if (!target) throw notFound('Not found');
    // A ping is never refused for what it carries: bytes that are not UTF-8 decode to
    // U+FFFD, and what the store cannot hold (NUL) is replaced the same way.
    const text = (value: string | undefined) => (value === undefined ? null : storableText(value));
    const body = Buffer.isBuffer(req.body) ? storableText(req.body.subarray(0, PING_BODY_BYTES).toString('utf8')) : '';
    try {
      const { state, seq } = await pingMonitor(deps, target.org_id, target.id, {
        kind, method: req.method, source_ip: text((req as Request).ip), user_agent: text(req.get('user-agent')), body,
      });
      await deps.reads.wrote(target.org_id, seq);
      res.json({ monitor: state!.name, status: state!.status });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) tokens.forget(token);
      if (err instanceof ApiError && err.status === 410) {
        const row = await deps.db.selectFrom('monitors').select('doc').where('id', '=', target.id).executeTakeFirst();
        res.status(410).json({ monitor: (row?.doc as { name?: string } | undefined)?.name ?? null, status: 'paused', error: { message: err.message, field: null } });
        return;
      }
      throw err;
    }
  });
  for (const m of ['get', 'post'] as const) {
    r[m]('/ping/:token', raw, ping('ping'));
    r[m]('/ping/:token/fail', raw, ping('fail'));
  }
  return r;
}
