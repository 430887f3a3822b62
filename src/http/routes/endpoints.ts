import { checkScript } from '../script-checks.ts';
import { featuresOf } from '../../commands/plan-rules.ts';
import { Router } from 'express';
import type { Selectable } from 'kysely';
import { SUBJECTS } from '../../../streams/subjects.ts';
import { createEndpoint, runEndpoint } from '../../commands/endpoint/handlers.ts';
import { forwardHealthOf, type Endpoint, type EndpointInput, type ForwardState, type SecretsChange, type Verification } from '../../commands/endpoint/types.ts';
import type { SealedSecrets } from '../../lib/sealed-secrets.ts';
import type { InboundEventEvent } from '../../commands/inbound-event/types.ts';
import type { EndpointsTable, InboundEventsTable } from '../../db/schema.ts';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import { headerObject, loadStoredRequest } from '../../inbound/stored-request.ts';
import { replayInboundEvent } from '../replay-event.ts';
import { isUtf8 } from 'node:buffer';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { createEndpointSchema, updateEndpointSchema } from '../schemas/endpoint.ts';
import { validate } from '../validate.ts';
import { orgPlan, planLimitFor } from '../plan-limits.ts';
import { limitParam } from './executions.ts';

/** How long inbound events are listed (and replayed in bulk). */
export const EVENT_HISTORY_MS = 30 * 24 * 3_600_000;
const HISTORY_MS = EVENT_HISTORY_MS;
const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

type Input = Omit<EndpointInput, 'verification'> & {
  secrets?: Record<string, string> | null;
  verification?: (Verification & { secret?: string }) | null;
};

/** An endpoint as responses show it, from its row. */
export function endpointResource(row: Selectable<EndpointsTable>, root: string) {
  const doc = row.doc as Record<string, unknown> & { forward_urls?: string[] };
  return {
    // Endpoints made before presets, or flow control, have none.
    verification: null,
    flow_control: null,
    // Resources made before notification channels name none: every channel.
    channels: null,
    ...doc,
    // Rows written before destination health have none: every URL active.
    forward_health: forwardHealthOf({ forward_urls: doc.forward_urls ?? [], forward_health: row.forward_health as ForwardState[] }),
    id: row.id,
    slug: row.slug,
    inbound_url: `${root}/in/${row.slug}`,
    paused: row.paused,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export function endpointRoutes(deps: ApiDeps, rootUrl: () => string): Router {
  const r = Router();
  const resource = (row: Selectable<EndpointsTable>) => endpointResource(row, rootUrl());
  const load = async (orgId: string, id: string) => {
    const row = await deps.db.selectFrom('endpoints').selectAll().where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Endpoint not found');
    return row;
  };
  const answer = async (orgId: string, e: Endpoint, seq: number) => {
    deps.endpoints.remember(e, e.id);
    await deps.reads.wrote(orgId, seq);
    await deps.reads.caughtUp(orgId);
    return resource(await load(orgId, e.id));
  };

  /**
   * Seals the secrets and the verification preset's secret: the command carries only
   * the secrets' names, the preset without its secret, and the sealed values.
   */
  function prepare(body: Input): { input: EndpointInput; secrets: SecretsChange | null; verificationSecret: SealedSecrets | null } {
    const { secrets, verification, ...rest } = body;
    const input: EndpointInput = rest;
    let verificationSecret: SealedSecrets | null = null;
    if (verification) {
      const { secret, ...preset } = verification;
      input.verification = preset;
      if (secret !== undefined) verificationSecret = deps.secrets.seal({ secret });
    } else if (verification === null) input.verification = null;
    if (secrets === undefined) return { input, secrets: null, verificationSecret };
    const plain = secrets ?? {};
    return { input, secrets: { names: Object.keys(plain).sort(), sealed: deps.secrets.seal(plain) }, verificationSecret };
  }

  r.get('/endpoints', handler(async (req, res) => {
    const rows = await deps.db.selectFrom('endpoints').selectAll().where('org_id', '=', req.orgId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    res.json({ data: rows.map(resource) });
  }));
  r.get('/endpoints/:id', handler(async (req, res) => void res.json({ data: resource(await load(req.orgId, req.params.id!)) })));
  r.post('/endpoints', idempotent(deps), handler(async (req, res) => {
    const body = validate<Input & { name: string }>(createEndpointSchema, jsonObject(req));
    const limit = await planLimitFor(deps, 'endpoint', req.orgId);
    await checkScript(deps.scripts, featuresOf(limit), 'endpoint', body.script);
    const { input, secrets, verificationSecret } = prepare(body);
    const { state, seq } = await createEndpoint(deps, req.orgId, { ...input, name: body.name }, secrets, limit, onceId(res, 'ep'), verificationSecret);
    res.status(201).json({ data: await answer(req.orgId, state!, seq) });
  }));
  r.put('/endpoints/:id', handler(async (req, res) => {
    const body = validate<Input>(updateEndpointSchema, jsonObject(req));
    const plan = await orgPlan(deps, req.orgId);
    await checkScript(deps.scripts, plan, 'endpoint', body.script);
    const { input, secrets, verificationSecret } = prepare(body);
    const { state, seq } = await runEndpoint(deps, req.orgId, req.params.id!, { type: 'UpdateEndpoint', plan, input, secrets, verificationSecret });
    res.json({ data: await answer(req.orgId, state!, seq) });
  }));
  r.delete('/endpoints/:id', handler(async (req, res) => {
    const { seq } = await runEndpoint(deps, req.orgId, req.params.id!, { type: 'DeleteEndpoint' });
    deps.endpoints.remember(null, req.params.id!);
    await deps.reads.wrote(req.orgId, seq);
    res.status(204).end();
  }));
  for (const [path, type] of [['pause', 'PauseEndpoint'], ['resume', 'ResumeEndpoint']] as const) {
    r.post(`/endpoints/:id/${path}`, handler(async (req, res) => {
      const { state, seq } = await runEndpoint(deps, req.orgId, req.params.id!, { type });
      res.json({ data: await answer(req.orgId, state!, seq) });
    }));
  }

  const loadEvent = async (orgId: string, endpointId: string, eventId: string) => {
    const row = await deps.db.selectFrom('inbound_events').selectAll().where('id', '=', eventId).where('endpoint_id', '=', endpointId)
      .where('org_id', '=', orgId).where('received_at', '>=', new Date(Date.now() - HISTORY_MS)).executeTakeFirst();
    if (!row) throw notFound('Inbound event not found');
    return row;
  };
  const storedRequest = (row: Selectable<InboundEventsTable>) => loadStoredRequest(deps.nats, Number(row.inbound_seq), row.id);
  const eventRows = async (rows: Selectable<InboundEventsTable>[]) => {
    const ids = rows.map((e) => e.id);
    // A debounced event's execution is the one an earlier event of its window made: found by its id.
    const shared = rows.filter((e) => e.outcome === 'debounced' && e.execution_id).map((e) => e.execution_id!);
    const executions = ids.length
      ? await deps.db.selectFrom('executions').select(['id', 'url', 'status', 'parent_id'])
        .where((w) => (shared.length ? w.or([w('parent_id', 'in', ids), w('id', 'in', shared)]) : w('parent_id', 'in', ids)))
        .orderBy('created_at').orderBy('id').execute()
      : [];
    const byEvent = new Map<string, Array<{ id: string; url: string; status: string }>>();
    const byId = new Map<string, { id: string; url: string; status: string }>();
    for (const x of executions) {
      const row = { id: x.id, url: x.url, status: x.status };
      byId.set(x.id, row);
      const list = byEvent.get(x.parent_id!) ?? [];
      list.push(row);
      byEvent.set(x.parent_id!, list);
    }
    return rows.map((e) => {
      const mine = e.outcome === 'debounced' ? [byId.get(e.execution_id!)].filter((x) => x !== undefined) : byEvent.get(e.id) ?? [];
      const first = mine.find((x) => x.id === e.execution_id);
      const status = e.outcome === 'filtered' || e.outcome === 'rejected' ? e.outcome : first?.status ?? null;
      return {
        id: e.id, method: e.method, source_ip: e.source_ip, received_at: iso(e.received_at),
        execution_id: e.execution_id, execution_status: status, outcome: e.outcome, executions: mine,
        script_logs: e.script_logs, error_message: e.error_message,
      };
    });
  };

  r.get('/endpoints/:id/events', handler(async (req, res) => {
    await load(req.orgId, req.params.id!);
    const rows = await deps.db.selectFrom('inbound_events').selectAll().where('endpoint_id', '=', req.params.id!).where('org_id', '=', req.orgId)
      .where('received_at', '>=', new Date(Date.now() - HISTORY_MS)).orderBy('received_at', 'desc').orderBy('inbound_seq', 'desc').orderBy('id', 'desc').limit(limitParam(req)).execute();
    res.json({ data: await eventRows(rows) });
  }));

  r.get('/endpoints/:id/events/:event_id', handler(async (req, res) => {
    const row = await loadEvent(req.orgId, req.params.id!, req.params.event_id!);
    const stored = await storedRequest(row);
    if (!stored) throw notFound('Inbound event not found');
    const [data] = await eventRows([row]);
    const utf8 = isUtf8(stored.body);
    res.json({
      data: {
        ...data,
        request: {
          method: stored.meta.method,
          path: stored.meta.path,
          query: stored.meta.query,
          headers: headerObject(stored.meta.headers),
          body: utf8 ? stored.body.toString('utf8') : stored.body.toString('base64'),
          body_encoding: utf8 ? 'utf8' : 'base64',
          body_size: stored.body.length,
        },
      },
    });
  }));

  r.post('/endpoints/:id/events/:event_id/replay', handler(async (req, res) => {
    const row = await loadEvent(req.orgId, req.params.id!, req.params.event_id!);
    const { ids, outcome, paused } = await replayInboundEvent(deps, req.orgId, row);
    const message = ids.length ? `Replay queued: ${ids.length} execution(s)${paused ? ', held while the endpoint is paused' : ''}` : `Nothing to forward: the event was ${outcome}`;
    res.status(202).json({ data: { execution_ids: ids }, message });
  }));
  return r;
}
