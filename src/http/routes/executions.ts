import { Router, type Request } from 'express';
import { DURATION_PATTERN, durationProblem, parseDuration } from '../../lib/duration.ts';
import { badRequest, notFound, unprocessable } from '../../lib/errors.ts';
import { instantProblem } from '../../lib/input-checks.ts';
import { queryInt, queryString } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { EXECUTION_LIST_COLUMNS, executionDetail, executionRow } from '../serializers.ts';

export const EXECUTION_STATUSES = ['pending', 'running', 'success', 'failed', 'timeout', 'cancelled'];
/** Every list's `limit` query parameter. */
export const LIST_LIMIT = { fallback: 50, max: 100 } as const;

export function limitParam(req: Request): number {
  const limit = queryInt(req, 'limit', LIST_LIMIT.fallback);
  if (limit < 1 || limit > LIST_LIMIT.max) throw unprocessable(`limit must be between 1 and ${LIST_LIMIT.max}`, 'limit');
  return limit;
}

/** An ISO timestamp, or a relative duration meaning that long before now. */
function instant(req: Request, name: string, nowMs: number): Date | undefined {
  const raw = queryString(req, name);
  if (raw === undefined || raw === '') return undefined;
  if (new RegExp(DURATION_PATTERN).test(raw)) {
    const problem = durationProblem(raw);
    if (problem) throw unprocessable(`${name} ${problem}`, name);
    return new Date(nowMs - parseDuration(raw)!);
  }
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(Date.parse(raw))) throw badRequest(`${name} must be an ISO 8601 timestamp or a duration such as 30m, 24h, 7d`, name);
  const problem = instantProblem(raw);
  if (problem) throw unprocessable(`${name} ${problem}`, name);
  return new Date(raw);
}

export function executionRoutes(deps: ApiDeps): Router {
  const r = Router();

  r.get('/executions', handler(async (req, res) => {
    const limit = limitParam(req);
    const offset = queryInt(req, 'offset', 0);
    if (offset < 0) throw unprocessable('offset must be 0 or more', 'offset');
    const status = queryString(req, 'status');
    if (status !== undefined && !EXECUTION_STATUSES.includes(status)) throw unprocessable(`status must be one of ${EXECUTION_STATUSES.join(', ')}`, 'status');
    const since = instant(req, 'since', Date.now());
    const until = instant(req, 'until', Date.now());
    const taskId = queryString(req, 'task_id');
    let q = deps.db.selectFrom('executions').select(EXECUTION_LIST_COLUMNS).where('org_id', '=', req.orgId);
    if (status) q = q.where('status', '=', status);
    if (since) q = q.where('scheduled_for', '>=', since);
    if (until) q = q.where('scheduled_for', '<=', until);
    if (taskId) q = q.where('source_id', '=', taskId);
    const rows = await q.orderBy('scheduled_for', 'desc').orderBy('id', 'desc').limit(limit + 1).offset(offset).execute();
    res.json({ data: rows.slice(0, limit).map(executionRow), has_more: rows.length > limit, limit, offset });
  }));

  r.get('/executions/:id', handler(async (req, res) => {
    // One snapshot for the row and its attempts, so a projection commit in between
    // cannot pair a new attempt with an older status.
    const data = await deps.db.transaction().setIsolationLevel('repeatable read').execute(async (trx) => {
      const row = await trx.selectFrom('executions').selectAll().where('id', '=', req.params.id!).where('org_id', '=', req.orgId).executeTakeFirst();
      if (!row) throw notFound('Execution not found');
      const attempts = await trx.selectFrom('execution_attempts').selectAll().where('execution_id', '=', row.id).orderBy('attempt').execute();
      return executionDetail(row, attempts);
    });
    res.json({ data });
  }));

  return r;
}
