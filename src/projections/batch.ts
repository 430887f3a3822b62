import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { isUniqueViolation, updateRows, upsertRows, type ColumnTypes, type Parent, type Row } from './bulk-write.ts';
import { ATTEMPT_ENDINGS } from './attempt-rows.ts';
import { copyRows, type CopyIn } from './copy-rows.ts';

/** One statement of a batch: SQL with its parameters, or a COPY with its rows. */
export interface Statement {
  execute(db: Kysely<any>): Promise<unknown>;
}

export interface StatementOptions {
  /**
   * The rows the batch creates (a task's first row, new executions, their attempts, the
   * pings of monitors the batch writes) go in by COPY instead of upserts. A key that
   * already exists then fails the transaction: for a caller that can go again without
   * it (a rebuild, into tables that start empty).
   */
  copyCreated?: boolean;
}

const TS = 'timestamptz';
const ORG_TYPES: ColumnTypes = {
  id: 'text', name: 'text', plan: 'text', webhook_secret: 'text', notification_email: 'text',
  notification_webhook_url: 'text', notify_on_failure: 'boolean', notify_on_recovery: 'boolean', ping_key: 'text',
  created_at: TS, updated_at: TS,
};
const KEY_TYPES: ColumnTypes = { public_id: 'text', org_id: 'text', secret_hash: 'text', created_at: TS, revoked_at: TS };
export const TASK_TYPES: ColumnTypes = { id: 'text', org_id: 'text', doc: 'json', lane: 'text', last_execution_id: 'text', created_at: TS, updated_at: TS };
export const EXECUTION_TYPES: ColumnTypes = {
  id: 'text', org_id: 'text', source_type: 'text', source_id: 'text', source_name: 'text', url: 'text',
  status: 'text', status_code: 'integer', error_message: 'text', attempt: 'integer', duration_ms: 'integer',
  scheduled_for: TS, started_at: TS, finished_at: TS, callback_url: 'text', request: 'json',
  response_body: 'text', response_body_encoding: 'text', response_truncated: 'boolean', response_headers: 'json', script_logs: 'json',
  parent_id: 'text', retry_of: 'text', retried_by: 'text', created_at: TS, updated_at: TS,
};
const ENDPOINT_TYPES: ColumnTypes = { id: 'text', org_id: 'text', slug: 'text', doc: 'jsonb', paused: 'boolean', forward_health: 'jsonb', created_at: TS, updated_at: TS };
export const INBOUND_EVENT_TYPES: ColumnTypes = {
  id: 'text', org_id: 'text', endpoint_id: 'text', method: 'text', path: 'text', query: 'text', source_ip: 'text',
  received_at: TS, body_size: 'integer', inbound_seq: 'bigint', outcome: 'text', execution_id: 'text',
  script_logs: 'jsonb', error_message: 'text',
};
/**
 * Inbound event rows by COPY, live as in a rebuild: each is written once, by its
 * event's one InboundEventReceived, and COPY costs Postgres about half an upsert's CPU
 * (measured: 9–12 against 18–21 µs a row). Under a savepoint: a key that exists after
 * all (a batch projected again) rolls the COPY back and the rows go in as upserts.
 * Then the rows of endpoints that do not exist (deleted while the request was routed)
 * are removed, as the upsert's parent check leaves them out; the batch's endpoints are
 * few, so that is one index probe each.
 */
function inboundEventRows(rows: Row[]): Statement[] {
  const endpoints = [...new Set(rows.map((r) => r.endpoint_id as string))];
  const orphans = sql`DELETE FROM inbound_events WHERE endpoint_id = ANY(ARRAY(
    SELECT e FROM unnest(${endpoints}::text[]) AS e WHERE NOT EXISTS (SELECT 1 FROM endpoints p WHERE p.id = e)))`;
  const copies = copyRows('inbound_events', rows, INBOUND_EVENT_TYPES);
  return [new CopyOrUpsert(copies, () => upsertRows('inbound_events', 'id', rows, INBOUND_EVENT_TYPES)), orphans];
}

/**
 * Rows by COPY under a savepoint, or, when a key exists already, the same rows by
 * upserts (encoded only then: it is rare).
 */
export class CopyOrUpsert implements Statement {
  readonly copies: CopyIn[];
  readonly upserts: () => Statement[];

  constructor(copies: CopyIn[], upserts: () => Statement[]) {
    this.copies = copies;
    this.upserts = upserts;
  }

  async execute(db: Kysely<any>): Promise<void> {
    await sql`SAVEPOINT copy_or_upsert`.execute(db);
    try {
      for (const copy of this.copies) await copy.execute(db);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await sql`ROLLBACK TO SAVEPOINT copy_or_upsert`.execute(db);
      for (const upsert of this.upserts()) await upsert.execute(db);
    }
    await sql`RELEASE SAVEPOINT copy_or_upsert`.execute(db);
  }
}

export const ATTEMPT_TYPES: ColumnTypes = {
  execution_id: 'text', attempt: 'integer', status: 'text', status_code: 'integer', started_at: TS,
  finished_at: TS, duration_ms: 'integer', error_message: 'text',
};
const SCHEDULE_TYPES: ColumnTypes = {
  id: 'text', org_id: 'text', doc: 'jsonb', next_run_at: TS, last_execution_id: 'text', disabled_reason: 'text', created_at: TS, updated_at: TS,
};
const MONITOR_TYPES: ColumnTypes = {
  id: 'text', org_id: 'text', token: 'text', doc: 'jsonb', status: 'text', last_ping_at: TS, next_expected_at: TS,
  slug: 'text', down_reason: 'text', created_at: TS, updated_at: TS,
};
const CHANNEL_TYPES: ColumnTypes = { id: 'text', org_id: 'text', doc: 'jsonb', created_at: TS, updated_at: TS };
const FLOW_KEY_TYPES: ColumnTypes = {
  org_id: 'text', key: 'text', parallelism: 'integer', rate: 'integer', period: 'text', paused: 'boolean', updated_at: TS,
};
const JOB_TYPES: ColumnTypes = {
  id: 'text', org_id: 'text', kind: 'text', status: 'text', filter: 'jsonb', total: 'integer', done: 'integer', skipped: 'integer',
  execution_ids: 'json', endpoint_id: 'text', forward_urls: 'json', created_at: TS, finished_at: TS, updated_at: TS,
};
export const PING_TYPES: ColumnTypes = {
  id: 'text', monitor_id: 'text', kind: 'text', received_at: TS, method: 'text', source_ip: 'text', user_agent: 'text', body: 'text',
  exit_status: 'integer', rid: 'text', duration_ms: 'integer',
};

/**
 * The changes of one batch of events, merged per row in memory and written in a
 * few set-based statements: a projector keeps up with thousands of events per
 * second without a round trip per event.
 */
export class ProjectionBatch {
  readonly orgs = new Map<string, Row>();
  readonly apiKeys = new Map<string, Row>();
  readonly tasks = new Map<string, Row>();
  /** Tasks whose first row this batch writes (their TaskCreated is in it). */
  readonly createdTasks = new Set<string>();
  readonly deletedTasks = new Set<string>();
  /** Soft-deleted by a lane cancel: the task is hidden (its executions end by their own events). */
  readonly cancelledTasks = new Map<string, string>();
  /** Execution rows created in this batch. */
  readonly newExecutions = new Map<string, Row>();
  /**
   * Of those, the runs of triggers (`TaskTriggered`, `ScheduleTriggered`): a trigger may
   * be committed after its source's delete (a bulk job's group), so its row is written
   * only while its task or schedule has one.
   */
  readonly triggeredRuns = new Set<string>();
  /** A trigger's run as its source's `last_execution_id`, by source id: set only on a row that exists (see `triggeredRuns`). */
  readonly lastRuns = { tasks: new Map<string, string>(), schedules: new Map<string, string>() };
  /** Changes to execution rows that already exist (or were created in this batch). */
  readonly executionPatches = new Map<string, Row>();
  readonly attempts = new Map<string, Row>();
  /** Each execution's last attempt (no retry followed), which its execution row holds: no row of its own unless cancelled. */
  readonly lastAttempts = new Map<string, Row>();
  /** Executions cancelled in this batch whose last attempt may have ended in an earlier one. */
  readonly cancelledExecutions = new Set<string>();
  /** A not-yet-run execution moved by a task update: applied only while it has not started. */
  readonly reschedules = new Map<string, { scheduled_for: string; at: string }>();
  readonly schedules = new Map<string, Row>();
  readonly monitors = new Map<string, Row>();
  readonly pings = new Map<string, Row>();
  readonly deletedMonitors = new Set<string>();
  readonly deletedSchedules = new Set<string>();
  readonly endpoints = new Map<string, Row>();
  readonly deletedEndpoints = new Set<string>();
  readonly inboundEvents = new Map<string, Row>();
  /** Flow-control keys by `<org> <key>`: limits from the latest task naming them, and pause. */
  readonly flowKeys = new Map<string, Row>();
  readonly channels = new Map<string, Row>();
  /** Bulk retry jobs: a job's row as its latest event of the batch left it. */
  readonly jobs = new Map<string, Row>();
  readonly deletedChannels = new Set<string>();
  /** Each channel's latest delivery in this batch (`last_delivery`). */
  readonly channelDeliveries = new Map<string, { at: string; ok: boolean; status_code: number | null; error: string | null }>();
  size = 0;

  /** A delivery to a channel (a notification's or a test's): the latest by time is its `last_delivery`. */
  channelDelivery(id: string, d: { at: string; ok: boolean; status_code: number | null; error: string | null }): void {
    const known = this.channelDeliveries.get(id);
    if (!known || known.at <= d.at) this.channelDeliveries.set(id, { at: d.at, ok: d.ok, status_code: d.status_code, error: d.error });
  }

  /** Merges `row` into the row kept for `id`; the batch owns the rows it keeps (each made for it), so in place. */
  patch(map: Map<string, Row>, id: string, row: Row): void {
    const existing = map.get(id);
    if (existing) Object.assign(existing, row);
    else map.set(id, row);
  }

  patchExecution(id: string, row: Row): void {
    const existing = this.newExecutions.get(id) ?? this.executionPatches.get(id);
    if (existing) Object.assign(existing, row);
    else this.executionPatches.set(id, { id, ...row });
  }

  /**
   * The batch as SQL statements, in the order they must run, their parameters already
   * encoded: a caller may build the next batch's while Postgres runs this one's.
   */
  statements(opts: StatementOptions = {}): Statement[] {
    const out: Statement[] = [];
    const upsert = (table: string, key: string | string[], rows: Iterable<Row>, types: ColumnTypes, parent?: Parent) => {
      const list = [...rows];
      if (list.length) out.push(...upsertRows(table, key, list, types, parent));
    };
    // Rows split into those COPY may create (`created`) and the rest, upserted.
    const write = (table: string, key: string | string[], rows: Iterable<Row>, types: ColumnTypes, created: (row: Row) => boolean, parent?: Parent) => {
      if (!opts.copyCreated) return upsert(table, key, rows, types, parent);
      const copied: Row[] = [];
      const rest: Row[] = [];
      for (const row of rows) (created(row) ? copied : rest).push(row);
      if (copied.length) out.push(...copyRows(table, copied, types));
      upsert(table, key, rest, types, parent);
    };
    upsert('organizations', 'id', this.orgs.values(), ORG_TYPES);
    upsert('api_keys', 'public_id', this.apiKeys.values(), KEY_TYPES);
    write('tasks', 'id', this.tasks.values(), TASK_TYPES, (r) => this.createdTasks.has(r.id as string));
    // Before executions and inbound events: theirs are written only for endpoints that exist
    // (and a trigger's run only for a task or schedule that does, `triggeredRuns`).
    upsert('endpoints', 'id', this.endpoints.values(), ENDPOINT_TYPES);
    upsert('schedules', 'id', this.schedules.values(), SCHEDULE_TYPES);
    // An endpoint's deliveries recorded just after its deletion must not leave orphan rows.
    const created = [...this.newExecutions.values()];
    const ofEndpoint = (r: Row | undefined) => r?.source_type === 'endpoint';
    const triggered = (r: Row | undefined) => !!r && this.triggeredRuns.has(r.id as string);
    upsert('executions', 'id', created.filter(ofEndpoint), EXECUTION_TYPES, { table: 'endpoints', column: 'source_id' });
    const runsOf = (type: string) => created.filter((r) => triggered(r) && r.source_type === type);
    if (opts.copyCreated) {
      // By COPY as the other new rows (half an upsert's cost); those whose source has no row go with the sources' last runs below.
      write('executions', 'id', created.filter((r) => !ofEndpoint(r)), EXECUTION_TYPES, () => true);
    } else {
      write('executions', 'id', created.filter((r) => !ofEndpoint(r) && !triggered(r)), EXECUTION_TYPES, () => true);
      upsert('executions', 'id', runsOf('task'), EXECUTION_TYPES, { table: 'tasks', column: 'source_id' });
      upsert('executions', 'id', runsOf('schedule'), EXECUTION_TYPES, { table: 'schedules', column: 'source_id' });
    }
    const lastRuns = (table: 'tasks' | 'schedules', types: ColumnTypes) => {
      const rows = [...this.lastRuns[table]].map(([id, run]) => ({ id, last_execution_id: run }));
      if (!rows.length) return;
      // A source this batch writes holds its run in its own row, and has one.
      const unchecked = opts.copyCreated ? runsOf(table === 'tasks' ? 'task' : 'schedule').filter((r) => !this[table].has(r.source_id as string)) : [];
      if (!unchecked.length) {
        out.push(...updateRows(table, 'id', rows, types));
        return;
      }
      // One column set, so one statement: its RETURNING names every source it found.
      const [found] = updateRows(table, 'id', rows, types, true);
      out.push(orphanRuns(unchecked, found!));
    };
    lastRuns('tasks', TASK_TYPES);
    lastRuns('schedules', SCHEDULE_TYPES);
    // Before the cancels land: an execution whose last attempt ended gives it a row of its own.
    if (this.cancelledExecutions.size) out.push(keepLastAttempts([...this.cancelledExecutions]));
    if (this.executionPatches.size) out.push(...updateRows('executions', 'id', [...this.executionPatches.values()], EXECUTION_TYPES));
    // An attempt of an execution created above has its parent; the others are checked.
    const createdHere = (r: Row) => {
      const execution = this.newExecutions.get(r.execution_id as string);
      return !!execution && !ofEndpoint(execution) && !triggered(execution);
    };
    write('execution_attempts', ['execution_id', 'attempt'], this.attempts.values(), ATTEMPT_TYPES, createdHere, { table: 'executions', column: 'execution_id' });
    // A monitor's row in full (a create, a change), or only its state (pings, goings down: `monitorStateRow`), updated.
    const monitorRows = [...this.monitors.values()];
    upsert('monitors', 'id', monitorRows.filter((r) => 'doc' in r), MONITOR_TYPES);
    const stateRows = monitorRows.filter((r) => !('doc' in r));
    if (stateRows.length) out.push(...updateRows('monitors', 'id', stateRows, MONITOR_TYPES));
    // A ping of a monitor written just above has its parent (a ping's monitor is created before it in the log).
    write('pings', 'id', this.pings.values(), PING_TYPES, (r) => this.monitors.has(r.monitor_id as string), { table: 'monitors', column: 'monitor_id' });
    if (this.deletedMonitors.size) {
      const ids = [...this.deletedMonitors];
      out.push(sql`DELETE FROM pings WHERE monitor_id = ANY(${ids})`, sql`DELETE FROM monitors WHERE id = ANY(${ids})`);
    }
    if (this.deletedSchedules.size) {
      const ids = [...this.deletedSchedules];
      out.push(...executionsOf(ids), sql`DELETE FROM schedules WHERE id = ANY(${ids})`);
    }
    upsert('flow_control_keys', ['org_id', 'key'], this.flowKeys.values(), FLOW_KEY_TYPES);
    if (this.inboundEvents.size) out.push(...inboundEventRows([...this.inboundEvents.values()]));
    if (this.deletedEndpoints.size) {
      const ids = [...this.deletedEndpoints];
      out.push(...executionsOf(ids), sql`DELETE FROM inbound_events WHERE endpoint_id = ANY(${ids})`, sql`DELETE FROM endpoints WHERE id = ANY(${ids})`);
    }
    upsert('channels', 'id', this.channels.values(), CHANNEL_TYPES);
    upsert('jobs', 'id', this.jobs.values(), JOB_TYPES);
    if (this.deletedChannels.size) out.push(sql`DELETE FROM channels WHERE id = ANY(${[...this.deletedChannels]})`);
    // After the channels' own rows: a delivery never moves `last_delivery` back in time (a
    // retried record of an older notification arriving late).
    for (const [id, d] of this.channelDeliveries) {
      out.push(sql`UPDATE channels SET last_delivery = ${JSON.stringify(d)}::jsonb
        WHERE id = ${id} AND (last_delivery IS NULL OR (last_delivery->>'at')::timestamptz <= ${d.at}::timestamptz)`);
    }
    for (const [id, r] of this.reschedules) {
      out.push(sql`UPDATE executions SET scheduled_for = ${r.scheduled_for}, updated_at = ${r.at}
        WHERE id = ${id} AND status = 'pending' AND attempt = 0`);
    }
    if (this.cancelledTasks.size) {
      const ids = [...this.cancelledTasks.keys()];
      const at = [...this.cancelledTasks.values()].pop()!;
      out.push(sql`UPDATE tasks SET deleted_at = ${at} WHERE id = ANY(${ids})`);
    }
    if (this.deletedTasks.size) {
      const ids = [...this.deletedTasks];
      out.push(...executionsOf(ids), sql`DELETE FROM tasks WHERE id = ANY(${ids})`);
    }
    return out;
  }

  async flush(trx: Transaction<Database>): Promise<void> {
    for (const statement of this.statements()) await statement.execute(trx);
  }
}

/**
 * Deletes the executions of these sources and their attempts. The attempts' ids are
 * looked up first (`= ANY(ARRAY(…))`), so their primary key serves the delete
 * whatever the planner guesses of tables still filling (a rebuild).
 */
function executionsOf(sourceIds: string[]): Statement[] {
  return [
    sql`DELETE FROM execution_attempts WHERE execution_id = ANY(ARRAY(SELECT id FROM executions WHERE source_id = ANY(${sourceIds})))`,
    sql`DELETE FROM executions WHERE source_id = ANY(${sourceIds})`,
  ];
}

/**
 * Trigger runs just written whose task or schedule has no row (deleted before the trigger
 * was committed) removed, in one statement with `found`, the update of their sources'
 * `last_execution_id` that answers the sources it found: no source is looked up twice.
 */
function orphanRuns(rows: Row[], found: RawBuilder<unknown>): Statement {
  const ids = rows.map((r) => r.id as string);
  const sources = rows.map((r) => r.source_id as string);
  return sql`WITH found AS (${found})
    DELETE FROM executions WHERE id = ANY(ARRAY(
      SELECT x.id FROM unnest(${ids}::text[], ${sources}::text[]) AS x(id, source_id)
      WHERE NOT EXISTS (SELECT 1 FROM found f WHERE f.id = x.source_id)))`;
}

/** The last attempt these executions' rows hold, as rows of its own (their rows are about to say cancelled). */
function keepLastAttempts(ids: string[]): Statement {
  return sql`INSERT INTO execution_attempts (execution_id, attempt, status, status_code, started_at, finished_at, duration_ms, error_message)
    SELECT id, attempt, status, status_code, started_at, finished_at, duration_ms, error_message FROM executions
    WHERE id = ANY(${ids}) AND status = ANY(${ATTEMPT_ENDINGS}) AND finished_at IS NOT NULL
    ON CONFLICT DO NOTHING`;
}
