import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/connect.ts';
import { DEAD, URL_HOST } from '../db/migrations.ts';
import { DURATION_PATTERN, durationProblem, parseDuration } from '../lib/duration.ts';
import { ApiError, badRequest, unprocessable } from '../lib/errors.ts';
import { instantProblem } from '../lib/input-checks.ts';

/**
 * The filters of the executions list, which the contract's bulk calls are to share
 * (CONTRACT.md, "Failure recovery"), checked once here: each value is read by name
 * (`parseExecutionFilter`'s `get`), a bad one is 400/422 naming it. Ids are compared within the caller's
 * organization only; an id that names none of its sources is 404 (`checkFilterSources`).
 */

export const EXECUTION_STATUSES = ['pending', 'running', 'success', 'failed', 'timeout', 'cancelled'];
export const SOURCE_TYPES = ['task', 'schedule', 'endpoint'] as const;
/** The filters' names, as the query parameters and the bulk body's `filter` keys. */
export const FILTER_NAMES = [
  'status', 'since', 'until', 'task_id', 'dead', 'source_type', 'schedule_id', 'endpoint_id', 'lane', 'host', 'status_code', 'error',
  'finished_after', 'finished_before',
] as const;
export type FilterName = (typeof FILTER_NAMES)[number];

export interface ExecutionFilter {
  status?: string;
  since?: Date;
  until?: Date;
  /** A task's (or, as before, a schedule's or endpoint's) id: the executions of that source. */
  task_id?: string;
  dead?: boolean;
  source_type?: (typeof SOURCE_TYPES)[number];
  schedule_id?: string;
  endpoint_id?: string;
  lane?: string;
  host?: string;
  /** Exact codes and classes (4 for `4xx`). */
  status_code?: { codes: number[]; classes: number[] };
  error?: string;
  finished_after?: Date;
  finished_before?: Date;
}

const RELATIVE = new RegExp(DURATION_PATTERN);
export const isRelative = (raw: string | undefined) => !!raw && RELATIVE.test(raw);
const TIME_NAMES = new Set(['since', 'until', 'finished_after', 'finished_before']);

/** An ISO timestamp, or a relative duration meaning that long before now. */
export function parseInstant(name: string, raw: string, nowMs: number): Date {
  if (isRelative(raw)) {
    const problem = durationProblem(raw);
    if (problem) throw unprocessable(`${name} ${problem}`, name);
    return new Date(nowMs - parseDuration(raw)!);
  }
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(Date.parse(raw))) throw badRequest(`${name} must be an ISO 8601 timestamp or a duration such as 30m, 24h, 7d`, name);
  const problem = instantProblem(raw);
  if (problem) throw unprocessable(`${name} ${problem}`, name);
  return new Date(raw);
}

/** `500,502` or `5xx` or both (`429,5xx`). */
function parseStatusCodes(raw: string): { codes: number[]; classes: number[] } {
  const codes: number[] = [];
  const classes: number[] = [];
  const tokens = raw.split(',').map((t) => t.trim());
  if (!tokens.length || tokens.length > 50) throw unprocessable('status_code must be 1 to 50 comma-separated codes (100-599) or classes such as 4xx, 5xx', 'status_code');
  for (const token of tokens) {
    const klass = /^([1-5])xx$/i.exec(token);
    if (klass) classes.push(Number(klass[1]));
    else if (/^[1-5]\d\d$/.test(token)) codes.push(Number(token));
    else throw unprocessable(`status_code must be comma-separated codes (100-599) or classes such as 4xx, 5xx, not ${JSON.stringify(token.slice(0, 20))}`, 'status_code');
  }
  return { codes, classes };
}

const MAX_TEXT = 500;

/**
 * The filter from named raw values (`get(name)` is the string given, or undefined).
 * `relative` says whether a time was given relative to now (such a page moves with the clock).
 */
export function parseExecutionFilter(get: (name: FilterName) => string | undefined, nowMs: number): { filter: ExecutionFilter; relative: boolean } {
  const filter: ExecutionFilter = {};
  let relative = false;
  for (const name of FILTER_NAMES) {
    const raw = get(name);
    if (raw === undefined || raw === '') continue;
    if (raw.length > MAX_TEXT) throw unprocessable(`${name} must be at most ${MAX_TEXT} characters`, name);
    if (TIME_NAMES.has(name)) {
      if (isRelative(raw)) relative = true;
      (filter as Record<string, unknown>)[name] = parseInstant(name, raw, nowMs);
      continue;
    }
    switch (name) {
      case 'status':
        if (!EXECUTION_STATUSES.includes(raw)) throw unprocessable(`status must be one of ${EXECUTION_STATUSES.join(', ')}`, 'status');
        filter.status = raw;
        break;
      case 'dead':
        if (raw !== 'true' && raw !== 'false') throw unprocessable('dead must be true or false', 'dead');
        if (raw === 'true') filter.dead = true;
        break;
      case 'source_type':
        if (!(SOURCE_TYPES as readonly string[]).includes(raw)) throw unprocessable(`source_type must be one of ${SOURCE_TYPES.join(', ')}`, 'source_type');
        filter.source_type = raw as ExecutionFilter['source_type'];
        break;
      case 'status_code':
        filter.status_code = parseStatusCodes(raw);
        break;
      case 'host':
        filter.host = raw.toLowerCase();
        break;
      case 'task_id': case 'schedule_id': case 'endpoint_id': case 'lane': case 'error':
        filter[name] = raw;
        break;
      default:
        throw new Error(`unhandled filter ${name}`);
    }
  }
  return { filter, relative };
}

/** `error`'s condition: a case-insensitive substring (`%`, `_`, `\\` escaped). */
const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
const errorMatches = (text: string) => sql`error_message ILIKE ${likePattern(text)}`;

/** The filter's conditions on `executions` (unqualified columns), the organization's first. */
export function filterConditions(orgId: string, f: ExecutionFilter): RawBuilder<unknown>[] {
  const where = [sql`org_id = ${orgId}`];
  if (f.status) where.push(sql`status = ${f.status}`);
  if (f.since) where.push(sql`scheduled_for >= ${f.since}`);
  if (f.until) where.push(sql`scheduled_for <= ${f.until}`);
  if (f.task_id) where.push(sql`source_id = ${f.task_id}`);
  // Ids carry their kind (`sch_`, `ep_`) and are unique: the source id alone, one index range
  // (a source_type condition beside it made Postgres AND two bitmaps, ~150 ms at 1M rows).
  if (f.schedule_id) where.push(f.schedule_id.startsWith('sch_') ? sql`source_id = ${f.schedule_id}` : sql`false`);
  if (f.endpoint_id) where.push(f.endpoint_id.startsWith('ep_') ? sql`source_id = ${f.endpoint_id}` : sql`false`);
  if (f.source_type) where.push(sql`source_type = ${f.source_type}`);
  // The partial indexes of the dead letters hold exactly these rows: the same predicate.
  if (f.dead) where.push(DEAD);
  // The lane's tasks first (tasks_org_lane), then their executions by source id: an
  // IN (subquery) let Postgres hash-join the whole organization's executions instead.
  if (f.lane) where.push(sql`source_id = ANY(ARRAY(SELECT id FROM tasks WHERE org_id = ${orgId} AND lane = ${f.lane} AND deleted_at IS NULL))`);
  if (f.host) where.push(sql`${URL_HOST} = ${f.host}`);
  if (f.status_code) {
    const { codes, classes } = f.status_code;
    const any = [
      ...(codes.length ? [sql`status_code = ANY(${codes}::int[])`] : []),
      ...classes.map((c) => sql`status_code BETWEEN ${c * 100} AND ${c * 100 + 99}`),
    ];
    where.push(sql`status_code IS NOT NULL AND (${sql.join(any, sql` OR `)})`);
  }
  // ILIKE, not strpos: the dead letters' trigram index (executions_dead_error_trgm) serves it.
  if (f.error) where.push(errorMatches(f.error));
  if (f.finished_after) where.push(sql`finished_at IS NOT NULL AND finished_at >= ${f.finished_after}`);
  if (f.finished_before) where.push(sql`finished_at IS NOT NULL AND finished_at <= ${f.finished_before}`);
  return where;
}

const SOURCE_ID_NAMES = ['task_id', 'schedule_id', 'endpoint_id'] as const;

/**
 * Another organization's ids are 404 (CONTRACT.md, "Failure recovery"), not an empty
 * list: each id filter must name a task, schedule or endpoint of the caller's
 * organization, or the source of one of its executions. Only
 * the caller's own rows are read, so the answer says nothing of other organizations.
 * An id of the caller's of another kind (a schedule's as `endpoint_id`) matches nothing.
 * `prefix`: the bulk calls name the field `filter.<name>`.
 */
export async function checkFilterSources(db: Db, orgId: string, f: ExecutionFilter, prefix = ''): Promise<void> {
  for (const name of SOURCE_ID_NAMES) {
    const id = f[name];
    if (!id) continue;
    const { rows: [found] } = await sql<{ ours: boolean }>`SELECT
        EXISTS (SELECT 1 FROM tasks WHERE id = ${id} AND org_id = ${orgId})
        OR EXISTS (SELECT 1 FROM schedules WHERE id = ${id} AND org_id = ${orgId})
        OR EXISTS (SELECT 1 FROM endpoints WHERE id = ${id} AND org_id = ${orgId})
        OR EXISTS (SELECT 1 FROM executions WHERE org_id = ${orgId} AND source_id = ${id}) AS ours`.execute(db);
    if (!found?.ours) throw new ApiError(404, `${prefix}${name}: no task, schedule or endpoint ${id} in this organization`, `${prefix}${name}`);
  }
}

/** The longest error message (bytes) the index-only count reads from `executions_dead_error` (a btree entry's limit is ~2,700). */
const SHORT_ERROR_BYTES = 2000;

/**
 * The filter's count (the bulk calls' `dry_run` and their "too many"). `error` alone
 * would fetch every candidate row from the heap to recheck the trigram match (~320 ms
 * for 50,000 of 1,000,000 rows); instead the messages up to 2,000 bytes are matched
 * inside `executions_dead_error` (org_id, error_message), index only, and the rare
 * longer ones through `executions_dead_error_long`: the sum of the two (with `dead`,
 * the aim's shape; without it the same queries read the organization's rows).
 */
export function countSql(orgId: string, f: ExecutionFilter): RawBuilder<{ count: string }> {
  const { error, ...others } = f;
  if (!error) return sql<{ count: string }>`SELECT count(*) AS count FROM executions WHERE ${sql.join(filterConditions(orgId, f), sql` AND `)}`;
  const rest = sql.join(filterConditions(orgId, others), sql` AND `);
  const pattern = likePattern(error);
  // The long ones' match is on an expression the trigram index does not cover: left to
  // itself, Postgres took that index there (both organizations' matches from the heap).
  return sql<{ count: string }>`SELECT
      (SELECT count(*) FROM executions WHERE ${rest} AND error_message IS NOT NULL AND octet_length(error_message) <= ${sql.lit(SHORT_ERROR_BYTES)} AND error_message ILIKE ${pattern})
      + (SELECT count(*) FROM executions WHERE ${rest} AND octet_length(error_message) > ${sql.lit(SHORT_ERROR_BYTES)} AND (error_message || '') ILIKE ${pattern}) AS count`;
}

/**
 * The conditions of a page of `rows` rows (limit + offset + 1), in the list's order. With
 * `finished_before` the matching rows are the old end of the organization's history,
 * and Postgres would walk the newest-first index from the top, filtering (~320 ms at
 * 1,000,000 rows): the page's ids are taken from two ranges instead, which together are
 * exactly the matches: those scheduled up to that time (the list's index from there
 * down) and those finished before they were scheduled (cancelled while waiting; their
 * partial indexes `executions_org_finished_early`, `executions_dead_finished_early`).
 */
export function pageConditions(orgId: string, f: ExecutionFilter, rows: number): RawBuilder<unknown>[] {
  const where = filterConditions(orgId, f);
  if (!f.finished_before) return where;
  const all = sql.join(where, sql` AND `);
  const order = sql`ORDER BY scheduled_for DESC, id DESC LIMIT ${rows}`;
  return [sql`org_id = ${orgId}`, sql`id = ANY(ARRAY(
      (SELECT id FROM executions WHERE ${all} AND scheduled_for <= ${f.finished_before} ${order})
      UNION ALL (SELECT id FROM executions WHERE ${all} AND finished_at < scheduled_for AND scheduled_for > ${f.finished_before} ${order})))`];
}
