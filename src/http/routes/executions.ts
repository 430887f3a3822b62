import { Router, type Request } from 'express';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { queryInt, queryString } from '../body.ts';
import { checkFilterSources, pageConditions, parseExecutionFilter } from '../execution-filter.ts';
import { handler, type ApiDeps } from '../context.ts';
import { sql } from 'kysely';
import { PAGE_COLUMNS, pageJson, type PageRow } from '../execution-page.ts';
import { PageCache } from '../page-cache.ts';
import { attemptsOf } from '../../projections/attempt-rows.ts';
import { PROJECTOR_NAME } from '../../projections/projector.ts';
import { executionDetail } from '../serializers.ts';
import { decideRetry, sourceGone, type RetryCommand } from '../../commands/execution/retry.ts';
import { triggerTask } from '../../commands/task/handlers.ts';
import { triggerSchedule } from '../../commands/schedule/handlers.ts';
import { ApiError } from '../../lib/errors.ts';
import { replayInboundEvent } from '../replay-event.ts';

/** A source's command found no source (deleted since): the retry's 409 `field: "source"`. */
async function sourceMustExist<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) throw sourceGone(err.message);
    throw err;
  }
}

/** Runs a retry's command on its source's subject (`POST /executions/{id}/retry`); the new execution's id. */
export async function runRetry(deps: ApiDeps, orgId: string, command: RetryCommand): Promise<string> {
  switch (command.type) {
    case 'TriggerTask': {
      const { events: [event], seq } = await sourceMustExist(() => triggerTask(deps, orgId, command.taskId, command.callbackUrl, command.retryOf));
      await deps.reads.wrote(orgId, seq);
      if (event?.type !== 'TaskTriggered') throw new Error('a trigger decided no TaskTriggered');
      return event.data.execution.id;
    }
    case 'TriggerSchedule': {
      const { events: [event], seq } = await sourceMustExist(() => triggerSchedule(deps, orgId, command.scheduleId, command.callbackUrl, command.retryOf));
      await deps.reads.wrote(orgId, seq);
      if (event?.type !== 'ScheduleTriggered') throw new Error('a trigger decided no ScheduleTriggered');
      return event.data.execution.id;
    }
    case 'ReplayDelivery': {
      const row = await deps.db.selectFrom('inbound_events').selectAll().where('id', '=', command.eventId).where('org_id', '=', orgId).executeTakeFirst();
      if (!row) throw sourceGone('its inbound event is no longer stored');
      const replayed = await replayInboundEvent(deps, orgId, row, { urls: [command.url], retryOf: () => command.retryOf });
      return replayed.ids[0]!;
    }
    default:
      return command satisfies never;
  }
}

export { EXECUTION_STATUSES } from '../execution-filter.ts';
/** Every list's `limit` query parameter. */
export const LIST_LIMIT = { fallback: 50, max: 100 } as const;

export function limitParam(req: Request): number {
  const limit = queryInt(req, 'limit', LIST_LIMIT.fallback);
  if (limit < 1 || limit > LIST_LIMIT.max) throw unprocessable(`limit must be between 1 and ${LIST_LIMIT.max}`, 'limit');
  return limit;
}

export function executionRoutes(deps: ApiDeps): Router {
  const r = Router();
  const pages = new PageCache();

  r.get('/executions', handler(async (req, res) => {
    const limit = limitParam(req);
    const offset = queryInt(req, 'offset', 0);
    if (offset < 0) throw unprocessable('offset must be 0 or more', 'offset');
    const { filter, relative } = parseExecutionFilter((name) => queryString(req, name), Date.now());
    // Relative times (`since=30m`) move with the clock, not with the read models: not cached.
    const cacheable = !relative;
    const key = `${req.orgId} ${req.url}`;
    const position = deps.reads.projected;
    const cached = cacheable ? pages.get(key, position) : undefined;
    if (cached !== undefined) return void res.type('application/json').send(cached);
    await checkFilterSources(deps.db, req.orgId, filter);
    const where = pageConditions(req.orgId, filter, limit + 1 + offset);
    // ORDER BY names the table's columns: the bare name would be the text alias, sorted as text, without the index.
    // The projector's checkpoint in the rows' own snapshot: the position this page is exactly.
    const { rows } = await sql<PageRow & { at_seq: string }>`SELECT ${PAGE_COLUMNS},
        (SELECT seq FROM projection_checkpoints WHERE name = ${PROJECTOR_NAME}) AS at_seq
      FROM executions WHERE ${sql.join(where, sql` AND `)}
      ORDER BY executions.scheduled_for DESC, executions.id DESC LIMIT ${limit + 1} OFFSET ${offset}`.execute(deps.db);
    const body = pageJson(rows, limit, offset);
    // Kept only when it is the state at the position this process knows: a page read
    // between a projector commit and its announcement is newer than that, and is not kept.
    if (cacheable && rows.length && Number(rows[0]!.at_seq) === position && deps.reads.projected === position) pages.set(key, position, body);
    res.type('application/json').send(body);
  }));

  r.get('/executions/:id', handler(async (req, res) => {
    // One snapshot for the row and its attempts, so a projection commit in between
    // cannot pair a new attempt with an older status.
    const data = await deps.db.transaction().setIsolationLevel('repeatable read').execute(async (trx) => {
      const row = await trx.selectFrom('executions').selectAll().where('id', '=', req.params.id!).where('org_id', '=', req.orgId).executeTakeFirst();
      if (!row) throw notFound('Execution not found');
      const attempts = await trx.selectFrom('execution_attempts').selectAll().where('execution_id', '=', row.id).orderBy('attempt').execute();
      return executionDetail(row, attemptsOf(row, attempts));
    });
    res.json({ data });
  }));

  r.post('/executions/:id/retry', handler(async (req, res) => {
    // A read of this organization's writes (the row of an execution it just made, its status).
    await deps.reads.caughtUp(req.orgId);
    const row = await deps.db.selectFrom('executions').select(['id', 'status', 'source_type', 'source_id', 'url', 'parent_id', 'callback_url'])
      .where('id', '=', req.params.id!).where('org_id', '=', req.orgId).executeTakeFirst();
    if (!row) throw notFound('Execution not found');
    const executionId = await runRetry(deps, req.orgId, decideRetry(row));
    res.status(202).json({ data: { execution_id: executionId, status: 'pending', retry_of: row.id }, message: 'Retry queued' });
  }));

  return r;
}
