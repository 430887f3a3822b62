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
import { forkBenchChild, startNats, startTarget, type SharedPostgres } from '../harness.ts';
import type { BenchContext } from '../stack.ts';
import { FLOOR_STREAM, taskSpec, type FloorWorkerConfig } from './floor-config.ts';
import { forkWorker } from './processes.ts';
import { HttpClient } from '../load.ts';
import { measureQueue, withPostCheck, withTeardown, type SystemRun } from './queue-run.ts';

const LANES = 100;
const PARTITIONS = 8;
const CONCURRENCY = 128;
const HTTP_CONCURRENCY = 64;

const SCHEMA = `
  CREATE TABLE floor_tasks (id text PRIMARY KEY, lane text NOT NULL, doc jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX floor_tasks_created ON floor_tasks (created_at DESC, id DESC);
  CREATE TABLE floor_executions (
    id text PRIMARY KEY, lane text NOT NULL, status text NOT NULL, status_code integer,
    started_at timestamptz, finished_at timestamptz, request jsonb, response_headers jsonb, response_body text,
    created_at timestamptz NOT NULL DEFAULT now());
  CREATE INDEX floor_executions_created ON floor_executions (created_at DESC, id DESC);
  CREATE INDEX floor_executions_lane ON floor_executions (lane, created_at DESC, id DESC);`;

/**
 * `lanes`: 100 lanes, creates added 1,000 per stored message; `free`: every job its own
 * lane, the same adds; `http`: every job its own lane, each created by its own
 * `POST /tasks` at concurrency 64 through floor-api.ts (jetcron's lane-free run's shape).
 */
export function runFloor(ctx: BenchContext, round: number, postgres: SharedPostgres, shape: 'lanes' | 'free' | 'http'): Promise<SystemRun> {
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
      targetUrl: target.url, natsUrl: nats.url, databaseUrl: database.url, shape: shape === 'lanes' ? 'lanes' : 'free', partitions: PARTITIONS, concurrency: CONCURRENCY,
    });
    defer(worker.stop);
    const api = shape === 'http' ? await forkBenchChild('peers/floor-api.ts', [], { FLOOR_NATS_URL: nats.url }) : undefined;
    if (api) defer(api.stop);
    const client = api ? new HttpClient(`http://127.0.0.1:${(api.ready as { port: number }).port}`, HTTP_CONCURRENCY) : undefined;
    if (client) defer(() => client.pool.close());
    let n = 0;
    const run = await measureQueue(
      {
        add: async (ids) => {
          if (client) {
            // Each create its own request, 64 at a time, as jetcron's lane-free run sends them.
            let next = 0;
            const one = async (): Promise<void> => {
              for (let i = next++; i < ids.length; i = next++) {
                const r = await client.send('POST', '/tasks', { body: JSON.stringify({ url: `http://127.0.0.1/hit?id=${ids[i]}` }) });
                if (r.status !== 201) throw new Error(`floor API answered ${r.status}: ${r.text.slice(0, 200)}`);
              }
            };
            await Promise.all(Array.from({ length: HTTP_CONCURRENCY }, one));
            return;
          }
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
          ...(api ? [{ name: 'floor create API (node)', pid: () => api.child.pid, withDescendants: false }] : []),
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

