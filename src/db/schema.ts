import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type Json<T = unknown> = ColumnType<T, string, string>;

export interface OrganizationsTable {
  id: string;
  name: string;
  plan: string;
  webhook_secret: string;
  notification_email: string | null;
  notification_webhook_url: string | null;
  notify_on_failure: boolean;
  notify_on_recovery: boolean;
  ping_key: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApiKeysTable {
  public_id: string;
  org_id: string;
  secret_hash: string;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}

/**
 * Also has columns `status` and `next_run_at`, no longer written (migration 0007): a
 * task's status and next run are its last execution's (`tasksWithStatus` in
 * src/http/serializers.ts).
 */
export interface TasksTable {
  id: string;
  org_id: string;
  doc: Json<Record<string, unknown>>;
  lane: string | null;
  last_execution_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: ColumnType<Date | null, never, never>;
}

/** Also has column `last_status`, no longer written (migration 0007): see `schedulesWithStatus`. */
export interface SchedulesTable {
  id: string;
  org_id: string;
  doc: Json<Record<string, unknown>>;
  next_run_at: Timestamp | null;
  last_execution_id: string | null;
  /** Why the service turned it off (`failing`: destination health); null: it did not. */
  disabled_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MonitorsTable {
  id: string;
  org_id: string;
  token: string;
  doc: Json<Record<string, unknown>>;
  status: string;
  last_ping_at: Timestamp | null;
  next_expected_at: Timestamp | null;
  slug: string | null;
  down_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface PingsTable {
  id: string;
  monitor_id: string;
  kind: string;
  received_at: Timestamp;
  method: string;
  source_ip: string | null;
  user_agent: string | null;
  body: string;
  exit_status: number | null;
  rid: string | null;
  duration_ms: number | null;
}

export interface ExecutionsTable {
  id: string;
  org_id: string;
  source_type: string;
  source_id: string;
  source_name: string;
  url: string;
  status: string;
  status_code: number | null;
  error_message: string | null;
  attempt: number;
  duration_ms: number | null;
  scheduled_for: Timestamp;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  callback_url: string | null;
  request: Json | null;
  response_body: string | null;
  /** `base64` when the body is kept as base64 of its bytes; null = utf8 text. */
  response_body_encoding: string | null;
  response_truncated: boolean;
  response_headers: Json | null;
  script_logs: Json<string[]>;
  /** An endpoint execution's inbound event; null for others. */
  parent_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The execution this one retries (`POST /executions/{id}/retry`, a bulk retry or replay); null for others. */
  retry_of: ColumnType<string | null, string | null | undefined, string | null>;
  /** The newest execution that retries this one; null while none does. */
  retried_by: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface JobsTable {
  id: string;
  org_id: string;
  kind: string;
  status: string;
  filter: Json<Record<string, string | boolean>>;
  total: number;
  done: number;
  skipped: number;
  execution_ids: Json<string[]>;
  endpoint_id: ColumnType<string | null, string | null | undefined, string | null>;
  forward_urls: ColumnType<string[] | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  finished_at: Timestamp | null;
  updated_at: Timestamp;
}

export interface EndpointsTable {
  id: string;
  org_id: string;
  slug: string;
  doc: Json<Record<string, unknown>>;
  paused: boolean;
  /** Every forward URL's health (`forwardHealthOf`). */
  forward_health: Json<unknown[]>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface InboundEventsTable {
  id: string;
  org_id: string;
  endpoint_id: string;
  method: string;
  path: string;
  query: string;
  source_ip: string | null;
  received_at: Timestamp;
  body_size: number;
  inbound_seq: ColumnType<string, number, number>;
  outcome: string;
  /** The first forward URL's execution of the original delivery. */
  execution_id: string | null;
  script_logs: Json<string[]>;
  error_message: string | null;
}

export interface ExecutionAttemptsTable {
  execution_id: string;
  attempt: number;
  status: string;
  status_code: number | null;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  duration_ms: number | null;
  error_message: string | null;
}

export interface ProjectionCheckpointsTable {
  name: string;
  seq: ColumnType<string, number, number>;
  updated_at: Generated<Date>;
}

export interface FlowControlKeysTable {
  org_id: string;
  key: string;
  parallelism: number | null;
  rate: number | null;
  period: string | null;
  paused: Generated<boolean>;
  updated_at: Date | string;
}

/** `doc`: `{kind, name, config, events}`, secrets masked; `last_delivery`: `{at, ok, status_code, error}`. */
export interface ChannelsTable {
  id: string;
  org_id: string;
  doc: Json<Record<string, unknown>>;
  last_delivery: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface Database {
  channels: ChannelsTable;
  flow_control_keys: FlowControlKeysTable;
  organizations: OrganizationsTable;
  api_keys: ApiKeysTable;
  tasks: TasksTable;
  executions: ExecutionsTable;
  jobs: JobsTable;
  schedules: SchedulesTable;
  monitors: MonitorsTable;
  pings: PingsTable;
  endpoints: EndpointsTable;
  inbound_events: InboundEventsTable;
  execution_attempts: ExecutionAttemptsTable;
  projection_checkpoints: ProjectionCheckpointsTable;
}
