/**
 * The design floor: what jetcron's design costs per job on this machine when written
 * with nothing but its guarantees (floor-worker.ts), measured beside the peers, so a
 * gap between jetcron and a peer splits into "the design on this machine" and
 * "jetcron's own overhead above it".
 *
 * Kept: creates stored in JetStream before they count (one acked message per add of
 * 1,000, as a batch is one commit), each holding the task's whole spec; each job sent
 * signed; its result (the request as sent, the response's status, headers and body)
 * stored in a group commit fenced by its partition's last sequence before the lane
 * moves on; and a task row (its spec as jsonb) and an execution row (request and
 * response) per job in Postgres (a create and its result merged when read together). Left out, so this is a floor and not a rival: the HTTP API, the
 * decision rules (retries, callbacks, flow keys, host backoff), leases and takeovers,
 * the event envelopes' ids, traces and metrics, attempts' own rows, the notifier.
 */
import { jetstreamManager, jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { startNats, startTarget, type SharedPostgres } from '../harness.ts';
import type { BenchContext } from '../stack.ts';
import { FLOOR_STREAM, type FloorWorkerConfig } from './floor-config.ts';
import { forkWorker } from './processes.ts';
import { measureQueue, withPostCheck, withTeardown, type SystemRun } from './queue-run.ts';

const LANES = 100;
const PARTITIONS = 8;
const CONCURRENCY = 128;

const SCHEMA = `
  CREATE TABLE floor_tasks (id text PRIMARY KEY, lane text NOT NULL, doc jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX floor_tasks_created ON floor_tasks (created_at DESC, id DESC);
  CREATE TABLE floor_executions (
    id text PRIMARY KEY, lane text NOT NULL, status text NOT NULL, status_code integer,
    started_at timestamptz, finished_at timestamptz, request jsonb, response_headers jsonb, response_body text,
    created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX floor_executions_created ON floor_executions (created_at DESC, id DESC);
  CREATE INDEX floor_executions_lane ON floor_executions (lane, created_at DESC, id DESC);`;

/** A task's spec as a create stores it (the fields of jetcron's, so the bytes are alike). */
function taskSpec(id: string, lane: string): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    id, lane, name: id, method: 'POST', url: `http://127.0.0.1/hit?id=${id}`, headers: {}, body: null, delay: null, run_at: null, timeout_ms: 30_000,
    retry_attempts: 0, callback_url: null, flow_control: null, enabled: true, notify_on_failure: null, notify_on_recovery: null,
    expected_status_codes: null, expected_body_pattern: null, on_failure_url: null, on_recovery_url: null, script: null, debounce: null,
    debounce_key: null, created_at: now, updated_at: now,
  };
}

export function runFloor(ctx: BenchContext, round: number, postgres: SharedPostgres, shape: 'lanes' | 'free'): Promise<SystemRun> {
  return withTeardown(`floor (${shape})`, ctx.log, async (defer) => {
    const database = await postgres.createDatabase(`peers_floor_${shape}_${round}`);
    defer(database.drop);
    const db = new pg.Pool({ connectionString: database.url, max: 2 });
    db.on('error', () => {});
    defer(() => db.end());
    await db.query(SCHEMA);
    const nats = await startNats();
    defer(nats.stop);
    const nc = await connect({ servers: nats.url });
    defer(() => nc.close());
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: FLOOR_STREAM, subjects: ['floor.>'], storage: 'file' as never, duplicate_window: 120_000_000_000 });
    const js = jetstream(nc);
    const target = await startTarget();
    defer(target.stop);
    const worker = await forkWorker<FloorWorkerConfig>('floor-worker.ts', {
      targetUrl: target.url, natsUrl: nats.url, databaseUrl: database.url, shape, partitions: PARTITIONS, concurrency: CONCURRENCY,
    });
    defer(worker.stop);
    let n = 0;
    const run = await measureQueue(
      {
        add: async (ids) => {
          // One stored message per call, as a batch is one commit.
          const jobs = ids.map((id) => {
            const lane = `l${n++ % LANES}`;
            return { id, lane, task: taskSpec(id, lane) };
          });
          await js.publish('floor.creates', JSON.stringify({ type: 'create', jobs }));
        },
        async completed() {
          const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM floor_executions WHERE status = 'success'");
          return r.rows[0]?.n ?? 0;
        },
        cpuGroups: [
          { name: 'floor worker (node)', pid: () => worker.pid, withDescendants: true, mainThread: true },
          { name: 'nats-server', pid: () => nats.pid(), withDescendants: false },
          { name: 'postgres (all backends)', pid: () => postgres.postmasterPid(), withDescendants: true },
          { name: 'target server (node)', pid: () => target.pid, withDescendants: true },
          { name: 'bench load generator: producer + poller (node)', pid: () => process.pid, withDescendants: false },
        ],
      },
      target,
    );
    return withPostCheck(run, await worker.stop());
  });
}
