/**
 * BullMQ on a redis-server of Debian's packages, started by the peers benchmark on a
 * free port without persistence and flushed (FLUSHALL) before each run.
 *
 * Producer (this process): `Queue.addBulk`, 1,000 jobs a call. Worker
 * (bullmq-worker.ts, another process): one `Worker` with `concurrency: 128`, each job
 * one POST to the target. Jobs take BullMQ's defaults (one attempt, completed jobs
 * kept), so the queue's completed count is the measure, as pg-boss's job table is.
 */
import { Queue } from 'bullmq';
import { startTarget } from '../harness.ts';
import type { BenchContext } from '../stack.ts';
import type { BullmqWorkerConfig } from './bullmq-worker.ts';
import { forkWorker, type BenchRedis } from './processes.ts';
import { measureQueue, withPostCheck, withTeardown, type SystemRun } from './queue-run.ts';

const QUEUE = 'http-post';
export const BULLMQ_CONCURRENCY = 128;

export function runBullmq(ctx: BenchContext, redis: BenchRedis): Promise<SystemRun> {
  return withTeardown('BullMQ', ctx.log, async (defer) => {
    await redis.flush();
    const target = await startTarget();
    defer(target.stop);
    const queue = new Queue<{ id: string }>(QUEUE, { connection: { host: '127.0.0.1', port: redis.port } });
    queue.on('error', (err: Error) => ctx.log(`BullMQ producer: ${err.message}`));
    defer(() => queue.close());
    await queue.waitUntilReady();
    const worker = await forkWorker<BullmqWorkerConfig>('bullmq-worker.ts', { targetUrl: target.url, redisPort: redis.port, queue: QUEUE, concurrency: BULLMQ_CONCURRENCY });
    defer(worker.stop);
    const run = await measureQueue(
      {
        add: async (ids) => void (await queue.addBulk(ids.map((id) => ({ name: 'post', data: { id } })))),
        completed: () => queue.getCompletedCount(),
        cpuGroups: [
          { name: 'BullMQ worker (node)', pid: () => worker.pid, withDescendants: true, mainThread: true },
          { name: 'redis-server', pid: () => redis.pid, withDescendants: false },
          { name: 'target server (node)', pid: () => target.pid, withDescendants: true },
          { name: 'bench load generator: producer + poller (node)', pid: () => process.pid, withDescendants: false },
        ],
      },
      target,
    );
    return withPostCheck(run, await worker.stop());
  });
}
