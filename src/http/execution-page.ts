import { sql } from 'kysely';

/**
 * The executions list, written as JSON text straight from the rows. A page is 100 rows
 * of 15 columns: parsing five timestamps a row into Dates and back, building objects,
 * then `JSON.stringify` cost more than the query itself (docs/benchmarks.md, aim 7). Here
 * Postgres sends the timestamps as text (the same output function, no extra work on its
 * side), they become ISO 8601 by string surgery, and the page is concatenated once. The
 * row's shape is `executionRow`'s (serializers.ts), key for key; a test compares them.
 */

/** The list's columns, timestamps as Postgres' text (`YYYY-MM-DD HH:MI:SS[.ffffff]+00` in UTC). */
export const PAGE_COLUMNS = sql.raw(
  `id, status, status_code, error_message, attempt, duration_ms, scheduled_for::text AS scheduled_for, started_at::text AS started_at,
   finished_at::text AS finished_at, source_id, source_name, source_type, url, retry_of, retried_by, created_at::text AS created_at, updated_at::text AS updated_at`,
);

export interface PageRow {
  id: string;
  status: string;
  status_code: number | null;
  error_message: string | null;
  attempt: number;
  duration_ms: number | null;
  scheduled_for: string;
  started_at: string | null;
  finished_at: string | null;
  source_id: string;
  source_name: string;
  source_type: string;
  url: string;
  retry_of: string | null;
  retried_by: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * Postgres' timestamptz text to `Date.prototype.toISOString()`'s form: UTC, milliseconds
 * (truncated, as a Date would hold them). Another zone offset (a server not in UTC) goes
 * through Date.
 */
export function isoFromPostgres(text: string | null): string | null {
  if (text === null) return null;
  if (text.length < 22 || text[10] !== ' ' || !text.endsWith('+00')) return new Date(text.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')).toISOString();
  const dot = text.indexOf('.', 19);
  const fraction = dot < 0 ? '000' : text.slice(dot + 1, text.length - 3).padEnd(3, '0').slice(0, 3);
  return `${text.slice(0, 10)}T${text.slice(11, 19)}.${fraction}Z`;
}

const str = (v: string | null) => (v === null ? 'null' : JSON.stringify(v));
const num = (v: number | null) => (v === null ? 'null' : String(v));
const ts = (v: string | null) => (v === null ? 'null' : `"${isoFromPostgres(v)}"`);

export function pageRowJson(r: PageRow): string {
  return `{"id":${str(r.id)},"status":${str(r.status)},"status_code":${num(r.status_code)},"error_message":${str(r.error_message)},"attempt":${num(r.attempt)},"duration_ms":${num(r.duration_ms)},"scheduled_for":${ts(r.scheduled_for)},"started_at":${ts(r.started_at)},"finished_at":${ts(r.finished_at)},"task":{"id":${str(r.source_id)},"name":${str(r.source_name)},"type":${str(r.source_type)},"url":${str(r.url)}},"retry_of":${str(r.retry_of)},"retried_by":${str(r.retried_by)},"created_at":${ts(r.created_at)},"updated_at":${ts(r.updated_at)}}`;
}

export function pageJson(rows: PageRow[], limit: number, offset: number): string {
  const shown = rows.length > limit ? rows.slice(0, limit) : rows;
  return `{"data":[${shown.map(pageRowJson).join(',')}],"has_more":${rows.length > limit},"limit":${limit},"offset":${offset}}`;
}

