import { Router } from 'express';
import { sql, type Selectable } from 'kysely';
import { acceptRetryJob, cancelJob } from '../../commands/job/handlers.ts';
import { MAX_JOB_SET, type RetryJob } from '../../commands/job/types.ts';
import type { JobsTable } from '../../db/schema.ts';
import { ApiError, notFound, unprocessable } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { filterConditions, parseExecutionFilter, type ExecutionFilter, type FilterName } from '../execution-filter.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { bulkRetrySchema } from '../schemas/job.ts';
import { validate } from '../validate.ts';
import { limitParam } from './executions.ts';

type JobFilter = RetryJob['filter'];

const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

/** A job as responses show it (from its event's state or its row). */
export function jobResource(j: Pick<RetryJob, 'id' | 'kind' | 'status' | 'filter' | 'total' | 'done' | 'skipped'> & { created_at: Date | string; finished_at: Date | string | null }) {
  return { id: j.id, kind: j.kind, status: j.status, filter: j.filter, total: j.total, done: j.done, skipped: j.skipped, created_at: iso(j.created_at), finished_at: iso(j.finished_at) };
}
const rowResource = (r: Selectable<JobsTable>) => jobResource({ ...r, kind: 'retry', status: r.status as RetryJob['status'], filter: r.filter as JobFilter });

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

export function jobRoutes(deps: ApiDeps): Router {
  const r = Router();

  r.post('/executions/retry', idempotent(deps), handler(async (req, res) => {
    const body = validate<{ filter: JobFilter; dry_run?: boolean }>(bulkRetrySchema, jsonObject(req));
    const { filter, accepted } = bulkFilter(body.filter, Date.now());
    // The set is what the read models hold once this organization's writes are in them.
    await deps.reads.caughtUp(req.orgId);
    const where = sql.join(filterConditions(req.orgId, filter), sql` AND `);
    if (body.dry_run) {
      const { rows } = await sql<{ count: string }>`SELECT count(*) AS count FROM executions WHERE ${where}`.execute(deps.db);
      return void res.json({ data: { count: Number(rows[0]!.count) } });
    }
    // Oldest first, as the list's order reversed; one more than the limit says "too many".
    const { rows } = await sql<{ id: string }>`SELECT id FROM executions WHERE ${where}
      ORDER BY executions.scheduled_for ASC, executions.id ASC LIMIT ${MAX_JOB_SET + 1}`.execute(deps.db);
    if (rows.length > MAX_JOB_SET) {
      const { rows: [counted] } = await sql<{ count: string }>`SELECT count(*) AS count FROM executions WHERE ${where}`.execute(deps.db);
      throw unprocessable(`filter matches ${Number(counted!.count)} executions; a job takes at most ${MAX_JOB_SET.toLocaleString('en')}: narrow it`, 'filter');
    }
    const jobId = onceId(res, 'rjb') ?? newId('rjb');
    const { state, seq } = await acceptRetryJob(deps, req.orgId, jobId, accepted, rows.map((x) => x.id));
    await deps.reads.wrote(req.orgId, seq);
    res.status(202).json({ data: jobResource(state!), message: `Retry job accepted: ${state!.total} execution(s)` });
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
