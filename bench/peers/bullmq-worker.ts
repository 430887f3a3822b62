/** A BullMQ Worker in its own process: see bullmq.ts for the options. */
import { Worker } from 'bullmq';
import { serveWorker, type WorkerConfig } from './child.ts';

export interface BullmqWorkerConfig extends WorkerConfig {
  redisPort: number;
  queue: string;
  concurrency: number;
}

await serveWorker<BullmqWorkerConfig>(async (config, post) => {
  const worker = new Worker<{ id: string }>(config.queue, (job) => post(job.data.id), {
    connection: { host: '127.0.0.1', port: config.redisPort, maxRetriesPerRequest: null },
    concurrency: config.concurrency,
  });
  worker.on('error', (err) => console.error(`bullmq worker: ${err.message}`));
  await worker.waitUntilReady();
  return () => worker.close();
});
