/**
 * pg-boss on the bench's shared embedded Postgres, a fresh database per run.
 *
 * Producer (this process): `insert(queue, jobs)`, pg-boss's batch insert, 1,000 jobs a call.
 * Workers (pg-boss-worker.ts, another process): `work()` with `localConcurrency` 4 ×
 * `batchSize` 16 = 64 jobs in flight, `burstWhenBatchFull` (fetch again at once while
 * batches come back full, instead of waiting for the next poll) and a queue with
 * `notify` + `useListenNotify` (workers woken by NOTIFY when jobs arrive): the options
 * pg-boss 12 documents for throughput. The handler POSTs the batch's jobs at once.
 * Jobs have no retries (`retryLimit: 0`), as jetcron's tasks here (`retry_attempts: 0`).
 * Completed = rows of the queue in state `completed` in pg-boss's job table.
 */
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { startTarget, type SharedPostgres } from '../harness.ts';
import type { BenchContext } from '../stack.ts';
import { forkWorker } from './processes.ts';
import type { PgBossWorkerConfig } from './pg-boss-worker.ts';
import { measureQueue, withPostCheck, withTeardown, type SystemRun } from './queue-run.ts';

const QUEUE = 'http-post';
export const PG_BOSS_OPTIONS = { localConcurrency: 4, batchSize: 16 };

export function runPgBoss(ctx: BenchContext, round: number, postgres: SharedPostgres): Promise<SystemRun> {
  return withTeardown('pg-boss', ctx.log, async (defer) => {
    const database = await postgres.createDatabase(`peers_pgboss_${round}`);
    defer(database.drop);
    const target = await startTarget();
    defer(target.stop);
    const boss = new PgBoss({ connectionString: database.url, schedule: false, supervise: false });
    boss.on('error', (err: Error) => ctx.log(`pg-boss producer: ${err.message}`));
    await boss.start();
    defer(() => boss.stop({ graceful: false, timeout: 5000 }));
    await boss.createQueue(QUEUE, { notify: true, retryLimit: 0 });
    const worker = await forkWorker<PgBossWorkerConfig>('pg-boss-worker.ts', { targetUrl: target.url, databaseUrl: database.url, queue: QUEUE, ...PG_BOSS_OPTIONS });
    defer(worker.stop);
    const db = new pg.Pool({ connectionString: database.url, max: 2 });
    db.on('error', () => {});
    defer(() => db.end());
    const run = await measureQueue(
      {
        add: async (ids) => void (await boss.insert(QUEUE, ids.map((id) => ({ data: { id } })))),
        async completed() {
          const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'", [QUEUE]);
          return r.rows[0]?.n ?? 0;
        },
        cpuGroups: [
          { name: 'pg-boss workers (node)', pid: () => worker.pid, withDescendants: true, mainThread: true },
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
