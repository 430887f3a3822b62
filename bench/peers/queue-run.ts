/**
 * One measured run of a peer queue (pg-boss or BullMQ), the same way for both: a
 * warm-up through the same path, then the producer (this process) adds the jobs in
 * batches while the workers (another process) POST each to the target; timed from
 * the first add until the queue reports every job completed (polled every 50 ms).
 */
import { cpuPhase, hrMs, sleep, type CpuGroup, type CpuReport, type Target } from '../harness.ts';
import { pollProgress } from '../progress.ts';

export const JOBS = 10_000;
/** Jobs per batch add (pg-boss insert / BullMQ addBulk). */
export const ADD_BATCH = 1_000;
export const QUEUE_WARMUP = 300;
const POLL_MS = 50;
const ADD_MAX_MS = 60_000;
/** After the adds: give up when the completed count has not moved for this long. */
const STALL_MS = 20_000;
const DRAIN_MAX_MS = 120_000;

export interface QueuePeer {
  /** Adds one job per id, in one batch call. */
  add(ids: string[]): Promise<void>;
  /** Jobs completed so far, as the queue itself reports. */
  completed(): Promise<number>;
  cpuGroups: CpuGroup[];
}

/** What a run of any system in the peers benchmark reports. */
export interface SystemRun {
  /** Jobs completed per second, first add (or create) → all completed. */
  rate: number;
  /** Jobs completed in the measured phase. */
  jobs: number;
  seconds: number;
  /** Every job completed within the bounds. */
  complete: boolean;
  cpu: CpuReport;
  /** Checks and oddities, one line. */
  check: string;
}

const ids = (prefix: string, from: number, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${from + i}`);

export async function measureQueue(peer: QueuePeer, target: Target): Promise<SystemRun> {
  await peer.add(ids('w', 0, QUEUE_WARMUP));
  const warmDeadline = hrMs() + 60_000;
  while ((await peer.completed()) < QUEUE_WARMUP && hrMs() < warmDeadline) await sleep(POLL_MS);
  const baseline = await peer.completed();
  await target.reset();

  const cpuEnd = cpuPhase(peer.cpuGroups);
  const t0 = hrMs();
  const progress = pollProgress({
    t0, goal: JOBS, pollMs: POLL_MS, count: async () => (await peer.completed()) - baseline, sample: () => undefined,
    near: async () => (await target.stats()).unique >= JOBS,
  });
  let added = 0;
  let addEnd: number;
  let cpu: CpuReport;
  try {
    for (let from = 0; from < JOBS && hrMs() - t0 < ADD_MAX_MS; from += ADD_BATCH) {
      await peer.add(ids('j', from, ADD_BATCH));
      added += ADD_BATCH;
    }
    addEnd = hrMs();
    await progress.drain({ since: addEnd, enough: added, stallMs: STALL_MS, maxMs: DRAIN_MAX_MS });
    cpu = cpuEnd();
  } finally {
    await progress.stop();
  }
  const { done, completeAt, seconds } = progress;
  const st = await target.stats();
  const check = [
    `added ${added} in ${((addEnd - t0) / 1000).toFixed(2)} s`,
    `completed ${done}`,
    `target: ${st.unique} distinct, ${st.duplicates} repeated`,
    ...(completeAt === undefined ? [`NOT ALL COMPLETED (gave up after ${seconds.toFixed(1)} s)`] : []),
  ].join('; ');
  return { rate: done / seconds, jobs: done, seconds, complete: completeAt !== undefined, cpu, check };
}

/** Runs `fn`, then every stop it deferred, newest first, whether `fn` threw or not. */
export async function withTeardown<T>(what: string, log: (m: string) => void, fn: (defer: (stop: () => Promise<unknown>) => void) => Promise<T>): Promise<T> {
  const stops: (() => Promise<unknown>)[] = [];
  try {
    return await fn((stop) => stops.push(stop));
  } finally {
    for (const stop of stops.reverse()) await stop().catch((e: Error) => log(`${what} teardown: ${e.message}`));
  }
}

/** The run, its check extended by the worker's POSTs that were not 2xx (from the worker's own count). */
export function withPostCheck(run: SystemRun, posts: Record<string, number> | undefined): SystemRun {
  if (!posts) return { ...run, check: `${run.check}; worker POST counts unknown` };
  const failed = Object.entries(posts).filter(([status]) => !status.startsWith('2'));
  return failed.length ? { ...run, check: `${run.check}; worker POST failures: ${failed.map(([k, v]) => `${k}×${v}`).join(', ')}` } : run;
}
