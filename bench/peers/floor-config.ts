/** What the design floor's two sides share (floor.ts starts floor-worker.ts, whose import runs it). */
import type { WorkerConfig } from './child.ts';

export const FLOOR_STREAM = 'FLOOR';

export interface FloorWorkerConfig extends WorkerConfig {
  natsUrl: string;
  databaseUrl: string;
  /** `lanes`: one job at a time per lane, in order; `free`: every job its own lane. */
  shape: 'lanes' | 'free';
  partitions: number;
  /** Jobs in flight at most (BullMQ's worker runs 128). */
  concurrency: number;
}
