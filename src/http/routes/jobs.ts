import { Router } from 'express';
import { SUBJECTS } from '../../../streams/subjects.ts';
import { sql, type RawBuilder, type Selectable } from 'kysely';
import { acceptRetryJob, cancelJob } from '../../commands/job/handlers.ts';
import { MAX_JOB_SET, type RetryJob } from '../../commands/job/types.ts';
import type { JobsTable } from '../../db/schema.ts';
import { ApiError, notFound, unprocessable } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { checkFilterSources, countSql, filterConditions, parseExecutionFilter, parseInstant, type ExecutionFilter, type FilterName } from '../execution-filter.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { bulkReplaySchema, bulkRetrySchema, enableForwardSchema } from '../schemas/job.ts';
import { runEndpoint } from '../../commands/endpoint/handlers.ts';
import { endpointResource, EVENT_HISTORY_MS } from './endpoints.ts';
import { validate } from '../validate.ts';
import { limitParam } from './executions.ts';

type JobFilter = RetryJob['filter'];

const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

/** A job as responses show it (from its event's state or its row). */
export function jobResource(j: Pick<RetryJob, 'id' | 'kind' | 'status' | 'filter' | 'total' | 'done' | 'skipped' | 'endpoint_id' | 'forward_urls'> & { created_at: Date | string; finished_at: Date | string | null }) {
  return {
    id: j.id, kind: j.kind, status: j.status, filter: j.filter, total: j.total, done: j.done, skipped: j.skipped,
    // A replay job names its endpoint and forward URLs (null: all).
    ...(j.kind === 'replay' ? { endpoint_id: j.endpoint_id ?? null, forward_urls: j.forward_urls ?? null } : {}),
    created_at: iso(j.created_at), finished_at: iso(j.finished_at),
  };
}
const rowResource = (r: Selectable<JobsTable>) =>
  jobResource({ ...r, kind: r.kind as RetryJob['kind'], status: r.status as RetryJob['status'], filter: r.filter as JobFilter, endpoint_id: r.endpoint_id ?? undefined });

/** The bulk call's filter: the list's, checked the same way (a bad one names `filter.<name>`), dead letters unless `dead: false`. */
function bulkFilter(given: JobFilter, nowMs: number): { filter: ExecutionFilter; accepted: JobFilter } {
  const accepted: JobFilter = { dead: true, ...given };
  try {
    const { filter } = parseExecutionFilter((name: FilterName) => (accepted[name] === undefined ? undefined : String(accepted[name])), nowMs);
    return { filter, accepted };
  } catch (err) {
    if (err instanceof ApiError && err.field) throw new ApiError(err.status, `filter.${err.message}`, `filter.${err.field}`);
    throw err;
  }
}

type ReplayFilter = { received_after?: string; received_before?: string; delivery_status?: string; method?: string };
const DELIVERY_STATUSES = ['failed', 'success', 'pending'];

/**
 * The inbound events of an endpoint a bulk replay takes (as `e`), within the 30 days
 * events are listed for. `delivery_status` is the event's worst delivery among those no
 * retry replaced (a failure replayed successfully no longer counts): failed (failed,
 * timeout, cancelled) over pending (pending, running) over success; an event without a
 * delivery (collected, filtered) has none and matches no `delivery_status`.
 */
function replayConditions(orgId: string, endpointId: string, f: ReplayFilter, nowMs: number) {
  const named = (name: string, problem: () => ApiError) => {
    const err = problem();
    return new ApiError(err.status, `filter.${err.message}`, `filter.${name}`);
  };
  const instantOf = (name: 'received_after' | 'received_before') => {
    const raw = f[name];
    if (!raw) return undefined;
    try {
      return parseInstant(name, raw, nowMs);
    } catch (err) {
      if (err instanceof ApiError) throw named(name, () => err);
      throw err;
    }
  };
  const after = instantOf('received_after');
  const before = instantOf('received_before');
  const where = [sql`e.org_id = ${orgId}`, sql`e.endpoint_id = ${endpointId}`, sql`e.received_at >= ${new Date(nowMs - EVENT_HISTORY_MS)}`];
  if (after) where.push(sql`e.received_at >= ${after}`);
  if (before) where.push(sql`e.received_at <= ${before}`);
  if (f.method) where.push(sql`e.method = ${f.method.toUpperCase()}`);
  if (f.delivery_status) {
    if (!DELIVERY_STATUSES.includes(f.delivery_status)) throw named('delivery_status', () => unprocessable(`delivery_status must be one of ${DELIVERY_STATUSES.join(', ')}`));
    where.push(sql`(SELECT CASE WHEN bool_or(x.status IN ('failed', 'timeout', 'cancelled')) THEN 'failed'
        WHEN bool_or(x.status IN ('pending', 'running')) THEN 'pending' WHEN count(*) > 0 THEN 'success' END
      FROM executions x WHERE x.parent_id = e.id AND x.org_id = ${orgId} AND x.retried_by IS NULL) = ${f.delivery_status}`);
  }
  return sql.join(where, sql` AND `);
}

export function jobRoutes(deps: ApiDeps, rootUrl: () => string): Router {
  const r = Router();

  r.post('/executions/retry', idempotent(deps), handler(async (req, res) => {
    const body = validate<{ filter: JobFilter; dry_run?: boolean }>(bulkRetrySchema, jsonObject(req));
    const { filter, accepted } = bulkFilter(body.filter, Date.now());
    // The set is what the read models hold once this organization's writes are in them.
    await deps.reads.caughtUp(req.orgId);
    await checkFilterSources(deps.db, req.orgId, filter, 'filter.');
    const where = sql.join(filterConditions(req.orgId, filter), sql` AND `);
    if (body.dry_run) {
      const { rows } = await countSql(req.orgId, filter).execute(deps.db);
      return void res.json({ data: { count: Number(rows[0]!.count) } });
    }
    // Oldest first, as the list's order reversed; one more than the limit says "too many".
    const { rows } = await sql<{ id: string }>`SELECT id FROM executions WHERE ${where}
      ORDER BY executions.scheduled_for ASC, executions.id ASC LIMIT ${MAX_JOB_SET + 1}`.execute(deps.db);
    if (rows.length > MAX_JOB_SET) {
      const { rows: [counted] } = await countSql(req.orgId, filter).execute(deps.db);
      throw unprocessable(`filter matches ${Number(counted!.count)} executions; a job takes at most ${MAX_JOB_SET.toLocaleString('en')}: narrow it`, 'filter');
    }
    const jobId = onceId(res, 'rjb') ?? newId('rjb');
    const { state, seq } = await acceptRetryJob(deps, req.orgId, jobId, accepted, rows.map((x) => x.id));
    announce(req.orgId, seq);
    await deps.reads.wrote(req.orgId, seq);
    res.status(202).json({ data: jobResource(state!), message: `Retry job accepted: ${state!.total} execution(s)` });
  }));

  r.post('/endpoints/:id/events/replay', idempotent(deps), handler(async (req, res) => {
    const body = validate<{ filter: ReplayFilter; forward_urls?: string[] | null; dry_run?: boolean }>(bulkReplaySchema, jsonObject(req));
    const endpoint = await deps.db.selectFrom('endpoints').select(['id', 'doc']).where('id', '=', req.params.id!).where('org_id', '=', req.orgId).executeTakeFirst();
    if (!endpoint) throw notFound('Endpoint not found');
    const forwardUrls = (endpoint.doc as { forward_urls?: string[] }).forward_urls ?? [];
    const chosen = body.forward_urls ?? null;
    if (chosen) {
      if (!chosen.length) throw unprocessable('forward_urls must name at least one of the endpoint\'s forward URLs (or be left out: all)', 'forward_urls');
      const unknown = chosen.find((u) => !forwardUrls.includes(u));
      if (unknown !== undefined) throw unprocessable(`forward_urls: ${unknown} is not a forward URL of this endpoint`, 'forward_urls');
    } else if (!forwardUrls.length) throw unprocessable('the endpoint has no forward_urls: it only collects events', 'forward_urls');
    const where = replayConditions(req.orgId, endpoint.id, body.filter ?? {}, Date.now());
    await deps.reads.caughtUp(req.orgId);
    if (body.dry_run) {
      const { rows } = await sql<{ count: string }>`SELECT count(*) AS count FROM inbound_events e WHERE ${where}`.execute(deps.db);
      return void res.json({ data: { count: Number(rows[0]!.count) } });
    }
    const job = await acceptReplay(req.orgId, onceId(res, 'rjb') ?? newId('rjb'), where, body.filter ?? {}, { endpointId: endpoint.id, forwardUrls: chosen });
    res.status(202).json({ data: job, message: `Replay job accepted: ${job.total} event(s)` });
  }));

  /** The jobs' worker starts on an accepted job at once, not at its next poll (`SUBJECTS.jobAccepted`). */
  function announce(orgId: string, seq: number): void {
    deps.nats.nc.publish(SUBJECTS.jobAccepted, `${orgId} ${seq}`);
  }

  /**
   * A replay job of the inbound events `where` names (as `e`), oldest first, at most
   * MAX_JOB_SET of them (more: 422 naming `filter`), accepted on the organization's jobs
   * aggregate; answered once the read models hold it.
   */
  async function acceptReplay(orgId: string, jobId: string, where: RawBuilder<unknown>, filter: JobFilter, replay: { endpointId: string; forwardUrls: string[] | null }) {
    const { rows } = await sql<{ id: string }>`SELECT e.id FROM inbound_events e WHERE ${where}
      ORDER BY e.received_at ASC, e.inbound_seq ASC, e.id ASC LIMIT ${MAX_JOB_SET + 1}`.execute(deps.db);
    if (rows.length > MAX_JOB_SET) {
      const { rows: [counted] } = await sql<{ count: string }>`SELECT count(*) AS count FROM inbound_events e WHERE ${where}`.execute(deps.db);
      throw unprocessable(`filter matches ${Number(counted!.count)} inbound events; a job takes at most ${MAX_JOB_SET.toLocaleString('en')}: narrow it`, 'filter');
    }
    const { state, seq } = await acceptRetryJob(deps, orgId, jobId, filter, rows.map((x) => x.id), replay);
    announce(orgId, seq);
    await deps.reads.wrote(orgId, seq);
    return jobResource(state!);
  }

  /**
   * Destination health (CONTRACT.md): a disabled forward URL made active again; with
   * `recover_since`, a replay job (as `POST /endpoints/{id}/events/replay`) to that URL
   * alone of the endpoint's events received since then whose delivery to it did not
   * succeed. 200 `{data: {endpoint, job}}` (`job` null without `recover_since`).
   */
  r.post('/endpoints/:id/forwards/enable', handler(async (req, res) => {
    const body = validate<{ url: string; recover_since?: string | null }>(enableForwardSchema, jsonObject(req));
    const nowMs = Date.now();
    const since = body.recover_since ? parseInstant('recover_since', body.recover_since, nowMs) : null;
    const { state, seq } = await runEndpoint(deps, req.orgId, req.params.id!, { type: 'EnableForward', url: body.url, recoverSince: since?.toISOString() ?? null });
    deps.endpoints.remember(state!, state!.id);
    await deps.reads.wrote(req.orgId, seq);
    let job: ReturnType<typeof jobResource> | null = null;
    if (since) {
      await deps.reads.caughtUp(req.orgId);
      const delivery = sql`FROM executions x WHERE x.parent_id = e.id AND x.org_id = ${req.orgId} AND x.url = ${body.url}`;
      const where = sql.join([
        sql`e.org_id = ${req.orgId}`, sql`e.endpoint_id = ${state!.id}`, sql`e.received_at >= ${new Date(Math.max(since.getTime(), nowMs - EVENT_HISTORY_MS))}`,
        sql`EXISTS (SELECT 1 ${delivery})`,
        // Not succeeded: none of its deliveries to the URL succeeded, nor is one still on its way.
        sql`NOT EXISTS (SELECT 1 ${delivery} AND x.status IN ('success', 'pending', 'running'))`,
      ], sql` AND `);
      job = await acceptReplay(req.orgId, newId('rjb'), where, { received_after: since.toISOString(), not_delivered_to: body.url }, { endpointId: state!.id, forwardUrls: [body.url] });
    }
    await deps.reads.caughtUp(req.orgId);
    const row = await deps.db.selectFrom('endpoints').selectAll().where('id', '=', state!.id).where('org_id', '=', req.orgId).executeTakeFirst();
    res.json({ data: { endpoint: row ? endpointResource(row, rootUrl()) : null, job }, message: job ? `Forward URL enabled; replay job accepted: ${job.total} event(s)` : 'Forward URL enabled' });
  }));

  r.get('/jobs', handler(async (req, res) => {
    const rows = await deps.db.selectFrom('jobs').selectAll().where('org_id', '=', req.orgId)
      .orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limitParam(req)).execute();
    res.json({ data: rows.map(rowResource) });
  }));

  const load = async (orgId: string, id: string) => {
    const row = await deps.db.selectFrom('jobs').selectAll().where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Job not found');
    return row;
  };

  r.get('/jobs/:id', handler(async (req, res) => {
    res.json({ data: rowResource(await load(req.orgId, req.params.id!)) });
  }));

  r.post('/jobs/:id/cancel', handler(async (req, res) => {
    await deps.reads.caughtUp(req.orgId);
    const row = await load(req.orgId, req.params.id!);
    const { events, state, seq } = await cancelJob(deps, req.orgId, req.params.id!);
    if (!events.length) return void res.json({ data: rowResource(row) });
    await deps.reads.wrote(req.orgId, seq);
    res.json({ data: jobResource(state!) });
  }));

  return r;
}
