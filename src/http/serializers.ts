import { DEFAULT_AUTO_DISABLE_AFTER } from '../commands/destination-health.ts';
import { sql, type Selectable } from 'kysely';
import type { Organization } from '../commands/organization/types.ts';
import { previousSecretExpiry } from '../commands/organization/decide.ts';
import type { Db } from '../db/connect.ts';
import type { ExecutionAttemptsTable, ExecutionsTable, SchedulesTable, TasksTable } from '../db/schema.ts';

const iso = (d: Date | string | null | undefined): string | null => (d == null ? null : new Date(d).toISOString());

/** `nowMs`: when the previous secret's overlap is judged (wall clock). */
export function organizationResource(o: Organization, nowMs: number) {
  return {
    id: o.id,
    name: o.name,
    plan: o.plan,
    webhook_secret: o.webhook_secret,
    previous_webhook_secret_expires_at: previousSecretExpiry(o, nowMs),
    ping_key: o.ping_key ?? null,
    notification_email: o.notification_email,
    notification_webhook_url: o.notification_webhook_url,
    notify_on_failure: o.notify_on_failure,
    notify_on_recovery: o.notify_on_recovery,
    auto_disable_after: o.auto_disable_after === undefined ? DEFAULT_AUTO_DISABLE_AFTER : o.auto_disable_after,
    created_at: iso(o.created_at),
    updated_at: iso(o.updated_at),
  };
}

/**
 * Tasks (as table `tasks`) with the state their last execution gives them: its status
 * and, while it is pending, when it runs. One primary-key lookup per task row, so the
 * projector does not rewrite a task row for each of its executions' events. A task
 * cancelled with its lane shows `cancelled`.
 */
export function tasksWithStatus(db: Db) {
  return db.selectFrom((eb) => eb.selectFrom('tasks as t').leftJoin('executions as e', 'e.id', 't.last_execution_id')
    .select(['t.id', 't.org_id', 't.doc', 't.lane', 't.last_execution_id', 't.created_at', 't.updated_at', 't.deleted_at'])
    .select(sql<string>`CASE WHEN t.deleted_at IS NOT NULL THEN 'cancelled' ELSE coalesce(e.status, 'pending') END`.as('status'))
    .select(sql<Date | null>`CASE WHEN t.deleted_at IS NULL AND e.status = 'pending' THEN e.scheduled_for END`.as('next_run_at'))
    .as('tasks'));
}

/** Schedules (as table `schedules`) with their last execution's status as `last_status`. */
export function schedulesWithStatus(db: Db) {
  return db.selectFrom((eb) => eb.selectFrom('schedules as s').leftJoin('executions as e', 'e.id', 's.last_execution_id')
    .selectAll('s').select('e.status as last_status').as('schedules'));
}

export type TaskRow = Selectable<TasksTable> & { status: string; next_run_at: Date | null };
export type ScheduleRow = Selectable<SchedulesTable> & { last_status: string | null };

export function taskResource(t: TaskRow) {
  return {
    // Tasks stored before flow control have no such field.
    flow_control: null,
    // Resources made before notification channels name none: every channel.
    channels: null,
    ...(t.doc as Record<string, unknown>),
    id: t.id,
    status: t.status,
    next_run_at: iso(t.next_run_at),
    last_execution_id: t.last_execution_id,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
  };
}

/** The columns a list row shows: not the request, response body and headers, which can be hundreds of KB a row. */
export const EXECUTION_LIST_COLUMNS = [
  'id', 'status', 'status_code', 'error_message', 'attempt', 'duration_ms', 'scheduled_for', 'started_at', 'finished_at',
  'source_id', 'source_name', 'source_type', 'url', 'retry_of', 'retried_by', 'created_at', 'updated_at',
] as const;

export function executionRow(e: Pick<Selectable<ExecutionsTable>, (typeof EXECUTION_LIST_COLUMNS)[number]>) {
  return {
    id: e.id,
    status: e.status,
    status_code: e.status_code,
    error_message: e.error_message,
    attempt: e.attempt,
    duration_ms: e.duration_ms,
    scheduled_for: iso(e.scheduled_for),
    started_at: iso(e.started_at),
    finished_at: iso(e.finished_at),
    task: { id: e.source_id, name: e.source_name, type: e.source_type, url: e.url },
    retry_of: e.retry_of,
    retried_by: e.retried_by,
    created_at: iso(e.created_at),
    updated_at: iso(e.updated_at),
  };
}

export function historyRow(e: Selectable<ExecutionsTable>) {
  return {
    id: e.id,
    status: e.status,
    scheduled_for: iso(e.scheduled_for),
    started_at: iso(e.started_at),
    finished_at: iso(e.finished_at),
    status_code: e.status_code,
    duration_ms: e.duration_ms,
    attempt: e.attempt,
  };
}

export function executionDetail(e: Selectable<ExecutionsTable>, attempts: Selectable<ExecutionAttemptsTable>[]) {
  return {
    ...executionRow(e),
    callback_url: e.callback_url,
    request: e.request,
    response_body: e.response_body,
    response_body_encoding: e.response_body_encoding ?? 'utf8',
    response_truncated: e.response_truncated,
    response_headers: e.response_headers,
    script_logs: e.script_logs,
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      status: a.status,
      status_code: a.status_code,
      started_at: iso(a.started_at),
      finished_at: iso(a.finished_at),
      duration_ms: a.duration_ms,
      error_message: a.error_message,
    })),
  };
}
