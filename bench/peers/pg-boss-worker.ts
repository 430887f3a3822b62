/** pg-boss workers in their own process: see pg-boss.ts for the options and why. */
import { PgBoss } from 'pg-boss';
import { serveWorker, type WorkerConfig } from './child.ts';

export interface PgBossWorkerConfig extends WorkerConfig {
  databaseUrl: string;
  queue: string;
  localConcurrency: number;
  batchSize: number;
}

await serveWorker<PgBossWorkerConfig>(async (config, post) => {
  const boss = new PgBoss({ connectionString: config.databaseUrl, useListenNotify: true, schedule: false, supervise: false, migrate: false });
  boss.on('error', (err: Error) => console.error(`pg-boss worker: ${err.message}`));
  await boss.start();
  await boss.work<{ id: string }>(
    config.queue,
    { localConcurrency: config.localConcurrency, batchSize: config.batchSize, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
    // A batch handler: the batch's jobs run at once; returning completes them all, throwing fails them all.
    async (jobs) => void (await Promise.all(jobs.map((job) => post(job.data.id)))),
  );
  return () => boss.stop({ graceful: true, timeout: 5000 });
});
