import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

/**
 * A dead letter (CONTRACT.md, "Failure recovery"), as the partial indexes' predicate and
 * the `dead` filter's condition: the same text, so Postgres proves the one from the other.
 */
export const DEAD = sql.raw(`status IN ('failed', 'timeout') AND retried_by IS NULL`);
/**
 * An execution's target host name, lowercased (an IPv6 literal keeps its brackets), as
 * SQL over the row's `url`: the `host` filter compares it and an index holds it, so both
 * must be this one expression. Postgres' regular-expression substring is immutable.
 */
export const URL_HOST = sql.raw(String.raw`lower(substring(url from '^[^:]+://(?:[^@/?#]*@)?(\[[^]]*\]|[^:/?#]+)'))`);

// Forward-only and numbered. Kysely's Migrator takes a lock, so two processes
// starting together run each migration once.
const migrations: Record<string, Migration> = {
  '0001_read_models': {
    async up(db: Kysely<unknown>) {
      await sql`
        CREATE TABLE organizations (
          id text PRIMARY KEY,
          name text NOT NULL,
          plan text NOT NULL,
          webhook_secret text NOT NULL,
          notification_email text,
          notification_webhook_url text,
          notify_on_failure boolean NOT NULL DEFAULT true,
          notify_on_recovery boolean NOT NULL DEFAULT true,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE TABLE api_keys (
          public_id text PRIMARY KEY,
          org_id text NOT NULL,
          secret_hash text NOT NULL,
          created_at timestamptz NOT NULL,
          revoked_at timestamptz
        );
        CREATE TABLE tasks (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          doc jsonb NOT NULL,
          lane text,
          status text NOT NULL DEFAULT 'pending',
          next_run_at timestamptz,
          last_execution_id text,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX tasks_org_created ON tasks (org_id, created_at DESC, id DESC);
        CREATE TABLE executions (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          source_type text NOT NULL,
          source_id text NOT NULL,
          source_name text NOT NULL,
          url text NOT NULL,
          status text NOT NULL,
          status_code integer,
          error_message text,
          attempt integer NOT NULL DEFAULT 0,
          duration_ms integer,
          scheduled_for timestamptz NOT NULL,
          started_at timestamptz,
          finished_at timestamptz,
          callback_url text,
          request jsonb,
          response_body text,
          response_truncated boolean NOT NULL DEFAULT false,
          response_headers jsonb,
          script_logs jsonb NOT NULL DEFAULT '[]',
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX executions_org_scheduled ON executions (org_id, scheduled_for DESC, id DESC);
        CREATE INDEX executions_source_scheduled ON executions (source_id, scheduled_for DESC, id DESC);
        CREATE INDEX tasks_last_execution ON tasks (last_execution_id);
        CREATE TABLE execution_attempts (
          execution_id text NOT NULL,
          attempt integer NOT NULL,
          status text NOT NULL,
          status_code integer,
          started_at timestamptz,
          finished_at timestamptz,
          duration_ms integer,
          error_message text,
          PRIMARY KEY (execution_id, attempt)
        );
        CREATE TABLE projection_checkpoints (
          name text PRIMARY KEY,
          seq bigint NOT NULL,
          updated_at timestamptz NOT NULL DEFAULT now()
        );
      `.execute(db);
    },
  },
  '0002_task_soft_delete': {
    async up(db: Kysely<unknown>) {
      await sql`ALTER TABLE tasks ADD COLUMN deleted_at timestamptz;
        CREATE INDEX tasks_org_lane ON tasks (org_id, lane) WHERE deleted_at IS NULL;`.execute(db);
    },
  },
  '0003_schedules': {
    async up(db: Kysely<unknown>) {
      await sql`CREATE TABLE schedules (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          doc jsonb NOT NULL,
          next_run_at timestamptz,
          last_execution_id text,
          last_status text,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX schedules_org_created ON schedules (org_id, created_at DESC, id DESC);
        CREATE INDEX schedules_last_execution ON schedules (last_execution_id);`.execute(db);
    },
  },
  '0004_monitors': {
    async up(db: Kysely<unknown>) {
      await sql`CREATE TABLE monitors (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          token text NOT NULL UNIQUE,
          doc jsonb NOT NULL,
          status text NOT NULL,
          last_ping_at timestamptz,
          next_expected_at timestamptz,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX monitors_org_created ON monitors (org_id, created_at DESC, id DESC);
        CREATE TABLE pings (
          id text PRIMARY KEY,
          monitor_id text NOT NULL,
          kind text NOT NULL,
          received_at timestamptz NOT NULL,
          method text NOT NULL,
          source_ip text,
          user_agent text,
          body text NOT NULL
        );
        CREATE INDEX pings_monitor_received ON pings (monitor_id, received_at DESC, id DESC);`.execute(db);
    },
  },
  '0005_endpoints': {
    async up(db: Kysely<unknown>) {
      await sql`CREATE TABLE endpoints (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          slug text NOT NULL UNIQUE,
          doc jsonb NOT NULL,
          paused boolean NOT NULL,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX endpoints_org_created ON endpoints (org_id, created_at DESC, id DESC);
        CREATE TABLE inbound_events (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          endpoint_id text NOT NULL,
          method text NOT NULL,
          path text NOT NULL,
          query text NOT NULL,
          source_ip text,
          received_at timestamptz NOT NULL,
          body_size integer NOT NULL,
          inbound_seq bigint NOT NULL,
          outcome text NOT NULL,
          execution_id text
        );
        CREATE INDEX inbound_events_endpoint_received ON inbound_events (endpoint_id, received_at DESC, id DESC);
        ALTER TABLE executions ADD COLUMN parent_id text;
        CREATE INDEX executions_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;`.execute(db);
    },
  },
  // A response body that is not storable as text is kept as base64 of its bytes.
  '0006_response_body_encoding': {
    async up(db) {
      await sql`ALTER TABLE executions ADD COLUMN response_body_encoding text`.execute(db);
    },
  },
  // A task's status and next run, and a schedule's last status, are read from their last
  // execution (a join on its primary key): the projector no longer rewrites the task or
  // schedule row per execution, so nothing looks rows up by last_execution_id. The
  // columns tasks.status, tasks.next_run_at and schedules.last_status stay for processes
  // of the previous version during an upgrade; nothing writes them any more.
  '0007_status_from_last_execution': {
    async up(db) {
      await sql`DROP INDEX IF EXISTS tasks_last_execution; DROP INDEX IF EXISTS schedules_last_execution;`.execute(db);
    },
  },
  // An inbound event's row shows what the endpoint script logged for it and why it was
  // rejected (or which hook failed).
  '0008_inbound_event_script': {
    async up(db) {
      await sql`ALTER TABLE inbound_events ADD COLUMN script_logs jsonb NOT NULL DEFAULT '[]', ADD COLUMN error_message text`.execute(db);
    },
  },
  // Heartbeats: an organization's ping key and a monitor's slug find a monitor by name
  // (`/ping/<ping_key>/<slug>`); why a monitor is down; a ping's exit status, run id and
  // the duration of the run it ended. Pings projected before have these null. The
  // indexes are not unique: uniqueness is the deciders' (a read model must take
  // whatever the log holds).
  '0009_heartbeats': {
    async up(db) {
      await sql`ALTER TABLE organizations ADD COLUMN ping_key text;
        CREATE INDEX organizations_ping_key ON organizations (ping_key) WHERE ping_key IS NOT NULL;
        ALTER TABLE monitors ADD COLUMN slug text, ADD COLUMN down_reason text;
        CREATE INDEX monitors_org_slug ON monitors (org_id, slug) WHERE slug IS NOT NULL;
        ALTER TABLE pings ADD COLUMN exit_status integer, ADD COLUMN rid text, ADD COLUMN duration_ms integer;`.execute(db);
    },
  },
  // The largest documents of the read models are kept as `json`, not `jsonb`: the API
  // only ever reads them whole, and Postgres takes a json value for a check of its
  // syntax where a jsonb one is parsed into a tree and its keys sorted (per 10,000
  // task rows about 100 against 250 ms, most of a projector's statement). Nothing
  // queries into them. A task's definition, and an execution's request, response
  // headers and script logs; the other documents are few and stay jsonb.
  '0010_json_documents': {
    async up(db) {
      await sql`ALTER TABLE tasks ALTER COLUMN doc TYPE json USING doc::json;
        ALTER TABLE executions ALTER COLUMN script_logs DROP DEFAULT,
          ALTER COLUMN request TYPE json USING request::json,
          ALTER COLUMN response_headers TYPE json USING response_headers::json,
          ALTER COLUMN script_logs TYPE json USING script_logs::json,
          ALTER COLUMN script_logs SET DEFAULT '[]';`.execute(db);
    },
  },
  // Flow-control keys (issue 22): each key's limits as the latest task naming it set
  // them, and whether it is paused. What waits and runs is the owners' to say.
  '0011_flow_control_keys': {
    async up(db) {
      await sql`CREATE TABLE flow_control_keys (
          org_id text NOT NULL,
          key text NOT NULL,
          parallelism integer,
          rate integer,
          period text,
          paused boolean NOT NULL DEFAULT false,
          updated_at timestamptz NOT NULL,
          PRIMARY KEY (org_id, key)
        )`.execute(db);
    },
  },
  // Notification channels (issue 38): the definition as responses show it (secrets masked;
  // the sealed values live in the events only) and the last delivery, a test included.
  '0012_channels': {
    async up(db) {
      await sql`CREATE TABLE channels (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          doc jsonb NOT NULL,
          last_delivery jsonb,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX channels_org_created ON channels (org_id, created_at DESC, id DESC);`.execute(db);
    },
  },
  // Failure recovery (issue 36): an execution's retry links (`retry_of` set when the
  // retry is planned, `retried_by` the newest execution retrying it), and an index for
  // each filter the executions list and the bulk calls share (docs/architecture.md,
  // "Failure recovery", shows their plans). Each leads with org_id and ends with the
  // list's order, so a filtered page reads one index range in order and stops at its limit.
  '0013_failure_recovery': {
    async up(db) {
      await sql`ALTER TABLE executions ADD COLUMN retry_of text, ADD COLUMN retried_by text;
        CREATE INDEX executions_retry_of ON executions (retry_of) WHERE retry_of IS NOT NULL;
        CREATE INDEX executions_org_dead ON executions (org_id, scheduled_for DESC, id DESC) WHERE ${DEAD};
        CREATE INDEX executions_org_source_type ON executions (org_id, source_type, scheduled_for DESC, id DESC);
        CREATE INDEX executions_org_status_code ON executions (org_id, status_code, scheduled_for DESC, id DESC) WHERE status_code IS NOT NULL;
        CREATE INDEX executions_org_host ON executions (org_id, ${URL_HOST}, scheduled_for DESC, id DESC);
        CREATE INDEX executions_org_finished ON executions (org_id, finished_at DESC, id DESC) WHERE finished_at IS NOT NULL;
        CREATE INDEX executions_org_source ON executions (org_id, source_id, scheduled_for DESC, id DESC);`.execute(db);
      // The error substring: a trigram index where the server has pg_trgm and lets this
      // role create it (a trusted extension since Postgres 13); elsewhere the filter works
      // without it, reading the organization's rows.
      await sql`DO $$ BEGIN
          CREATE EXTENSION IF NOT EXISTS pg_trgm;
          CREATE INDEX executions_error_trgm ON executions USING gin (error_message gin_trgm_ops) WHERE error_message IS NOT NULL;
        EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'executions_error_trgm not built: %', SQLERRM;
        END $$`.execute(db);
    },
  },
  // Bulk retry jobs (issue 36): each job as its latest event left it, and its set (the
  // worker reads the set from here once the projector has its acceptance).
  '0014_jobs': {
    async up(db) {
      await sql`CREATE TABLE jobs (
          id text PRIMARY KEY,
          org_id text NOT NULL,
          kind text NOT NULL,
          status text NOT NULL,
          filter jsonb NOT NULL,
          total integer NOT NULL,
          done integer NOT NULL,
          skipped integer NOT NULL,
          execution_ids json NOT NULL DEFAULT '[]',
          created_at timestamptz NOT NULL,
          finished_at timestamptz,
          updated_at timestamptz NOT NULL
        );
        CREATE INDEX jobs_org_created ON jobs (org_id, created_at DESC, id DESC);
        CREATE INDEX jobs_running ON jobs (org_id) WHERE status = 'running';`.execute(db);
    },
  },
  // A replay job's endpoint and forward URLs (null: all of them).
  '0015_replay_jobs': {
    async up(db) {
      await sql`ALTER TABLE jobs ADD COLUMN endpoint_id text, ADD COLUMN forward_urls json`.execute(db);
    },
  },
  // Destination health: why the service turned a schedule off, and each forward URL's health.
  '0016_destination_health': {
    async up(db) {
      await sql`ALTER TABLE schedules ADD COLUMN disabled_reason text`.execute(db);
      await sql`ALTER TABLE endpoints ADD COLUMN forward_health jsonb NOT NULL DEFAULT '[]'`.execute(db);
    },
  },
  // The two filters over 100 ms at 1,000,000 rows (docs/failure-recovery.md shows the
  // plans): `error`'s count matched inside a btree, index only (`countSql`: messages up
  // to 2,000 bytes, a btree entry's limit being ~2,700; the longer ones by the second,
  // tiny index); and `finished_before`'s page, whose matches are the organization's old
  // end, from the list's index below that time plus the executions finished before
  // they were scheduled (`pageConditions`).
  '0017_filter_plans': {
    async up(db) {
      await sql`CREATE INDEX executions_org_error ON executions (org_id, error_message) WHERE error_message IS NOT NULL AND octet_length(error_message) <= 2000;
        CREATE INDEX executions_org_error_long ON executions (org_id) WHERE octet_length(error_message) > 2000;
        CREATE INDEX executions_org_finished_early ON executions (org_id, scheduled_for DESC, id DESC) WHERE finished_at < scheduled_for;`.execute(db);
    },
  },
  // The filters' indexes over every execution cost each result's write a third more of
  // Postgres's CPU (67 → 98 µs a job, `PB_SCHEMA=1 node bench/projector-batches.ts`):
  // each was a new entry at the insert and again at the result's (never HOT) update. The
  // aim they serve is the dead letters' (issue 36: `dead=true` with each filter, and the
  // bulk calls, dead by default), so they hold the dead letters only: an execution that
  // succeeds never enters them. `executions_org_source` repeated
  // `executions_source_scheduled` (a source id names one organization's source). The
  // trigram index and `finished_early` (no row without an error, or finished on time, is
  // in them) stay for lists without `dead`, which walk `executions_org_scheduled`. The
  // statistics tell the planner how rare a long error message is (it guessed a third of
  // the rows, and took the trigram index for `countSql`'s long ones): docs/failure-recovery.md.
  '0018_dead_letter_indexes': {
    async up(db) {
      await sql`DROP INDEX IF EXISTS executions_org_source_type;
        DROP INDEX IF EXISTS executions_org_status_code;
        DROP INDEX IF EXISTS executions_org_host;
        DROP INDEX IF EXISTS executions_org_finished;
        DROP INDEX IF EXISTS executions_org_source;
        CREATE INDEX executions_dead_source_type ON executions (org_id, source_type, scheduled_for DESC, id DESC) WHERE ${DEAD};
        CREATE INDEX executions_dead_source ON executions (source_id, scheduled_for DESC, id DESC) WHERE ${DEAD};
        CREATE INDEX executions_dead_status_code ON executions (org_id, status_code, scheduled_for DESC, id DESC) WHERE ${DEAD} AND status_code IS NOT NULL;
        CREATE INDEX executions_dead_host ON executions (org_id, ${URL_HOST}, scheduled_for DESC, id DESC) WHERE ${DEAD};
        CREATE INDEX executions_dead_finished ON executions (org_id, finished_at DESC, id DESC) WHERE ${DEAD};
        DROP INDEX IF EXISTS executions_org_error;
        DROP INDEX IF EXISTS executions_org_error_long;
        CREATE INDEX executions_dead_error ON executions (org_id, error_message) WHERE ${DEAD} AND octet_length(error_message) <= 2000;
        CREATE INDEX executions_dead_error_long ON executions (org_id) WHERE ${DEAD} AND octet_length(error_message) > 2000;
        CREATE INDEX executions_dead_finished_early ON executions (org_id, scheduled_for DESC, id DESC) WHERE ${DEAD} AND finished_at < scheduled_for;
        CREATE STATISTICS IF NOT EXISTS executions_error_length ON (octet_length(error_message)) FROM executions;`.execute(db);
    },
  },
  // The trigram index holds the dead letters only, as the other filters' indexes do. Over
  // every execution with an error, each of its rows entered it again when a retry marked
  // it `retried_by` (a non-HOT update: the column is in the dead letters' predicate): 45
  // against 30 µs a retry (pg_stat_statements, bench/bulk-retry.ts). A page of `error`
  // without `dead` walks `executions_org_scheduled` and filters, as its count already did.
  '0019_dead_error_trigrams': {
    async up(db) {
      await sql`DROP INDEX IF EXISTS executions_error_trgm`.execute(db);
      await sql`DO $$ BEGIN
          CREATE EXTENSION IF NOT EXISTS pg_trgm;
          CREATE INDEX executions_dead_error_trgm ON executions USING gin (error_message gin_trgm_ops) WHERE ${DEAD} AND error_message IS NOT NULL;
        EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'executions_dead_error_trgm not built: %', SQLERRM;
        END $$`.execute(db);
    },
  },
  // What a retry writes beside a fresh task, made cheaper (pg_stat_statements over a job of
  // bench/bulk-retry.ts, docs/failure-recovery.md). No query looks executions up by
  // `retry_of` (the links are read off the rows listed), yet every retry entered that index
  // twice: when its row was written and when its result changed the row (a non-HOT update,
  // as every result is). A retry sets its task's `last_execution_id`, a column no index
  // holds: with room left on the task's page the new version stays there and no index is
  // touched (a HOT update), where full pages (COPY fills them) moved every such row.
  '0020_retry_writes': {
    async up(db) {
      await sql`DROP INDEX IF EXISTS executions_retry_of;
        ALTER TABLE tasks SET (fillfactor = 70);`.execute(db);
    },
  },
};

export const READ_MODEL_TABLES = [
  'jobs',
  'channels',
  'flow_control_keys',
  'endpoints',
  'inbound_events',
  'monitors',
  'pings',
  'schedules',
  'organizations',
  'api_keys',
  'tasks',
  'executions',
  'execution_attempts',
  'projection_checkpoints',
] as const;

/** The read models proper: every table the projections fill, without their checkpoint (a rebuild loads these fresh). */
export const PROJECTED_TABLES = READ_MODEL_TABLES.filter((t) => t !== 'projection_checkpoints');

const provider: MigrationProvider = { getMigrations: async () => migrations };

export async function migrate(db: Kysely<any>): Promise<void> {
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed: ${String((error as Error).message ?? error)}`);
  }
}

/** Drops every read model and the migration history, for `projections rebuild`. */
export async function dropReadModels(db: Kysely<any>): Promise<void> {
  for (const table of [...READ_MODEL_TABLES, 'kysely_migration', 'kysely_migration_lock']) {
    await sql`DROP TABLE IF EXISTS ${sql.table(table)} CASCADE`.execute(db);
  }
}
