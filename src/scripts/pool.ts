import { Worker } from 'node:worker_threads';
import { WORKER_RESOURCE_LIMITS } from './limits.ts';
import type { PoolAnswer, WorkerConfig, WorkerMessage, WorkerRequest } from './protocol.ts';

/**
 * The pool on the main thread: a few warm workers, each running one call at a time,
 * and a FIFO of calls waiting for one. The main thread never runs Lua; it posts a call
 * and arms a timer. A worker that has not answered when the timer fires is terminated
 * (`worker.terminate()` stops even a long C call inside the WebAssembly module) and a
 * new one is started at once; a worker that dies by itself (its V8 heap limit, a
 * broken state) is replaced the same way.
 */
export interface PoolOptions {
  workers: number;
  /** After this long the worker is terminated and the call answers `timeMessage`. */
  hardStopMs: number;
  timeMessage: string;
  memoryMessage: string;
  queueWaitMs: number;
  maxQueued: number;
  worker: WorkerConfig;
}

export interface PoolStats {
  workers: number;
  ready: number;
  busy: number;
  queued: number;
  /** Workers started to replace one that was terminated or died. */
  replaced: number;
}

export interface WorkerPool {
  submit(call: Omit<WorkerRequest, 'id'>): Promise<PoolAnswer>;
  stats(): PoolStats;
  close(): Promise<void>;
}

interface Job {
  request: WorkerRequest;
  resolve: (answer: PoolAnswer) => void;
  waitTimer: NodeJS.Timeout | null;
  startedAt: number;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  /** Terminated by the pool or exited: its events no longer matter. */
  retired: boolean;
  error: (Error & { code?: string }) | null;
}

/** Starts after this many failed starts in a row fail the waiting calls, then retry with backoff. */
const START_FAILURES_BEFORE_GIVING_UP = 3;
const MAX_START_BACKOFF_MS = 30_000;
/** How long a call waits for the pool's first worker to start (a busy machine takes seconds). */
const START_WAIT_MS = 60_000;

export function createWorkerPool(opts: PoolOptions): WorkerPool {
  const slots = new Set<Slot>();
  const exiting = new Set<Promise<unknown>>();
  const queue: Job[] = [];
  let nextId = 1;
  let closed = false;
  let replaced = 0;
  let startFailures = 0;
  // Whether a worker has ever been ready. Until then a call waits for the pool to start
  // (bounded by START_WAIT_MS), not for a free worker: the queue wait bounds waiting
  // behind busy workers, and a busy machine may take longer than it to start one.
  let started = false;
  const restartTimers = new Set<NodeJS.Timeout>();

  const elapsed = (job: Job) => performance.now() - job.startedAt;

  function finish(job: Job, answer: PoolAnswer): void {
    if (job.waitTimer) clearTimeout(job.waitTimer);
    job.waitTimer = null;
    job.resolve(answer);
  }

  function spawn(): void {
    if (closed) return;
    let worker: Worker;
    try {
      worker = startWorker(opts.worker);
    } catch (err) {
      startFailed(err instanceof Error ? err.message : String(err));
      return;
    }
    const slot: Slot = { worker, ready: false, job: null, timer: null, retired: false, error: null };
    slots.add(slot);
    // The pool must not keep a process alive by itself; a call in flight does (its timer).
    slot.worker.unref();
    slot.worker.on('message', (msg: WorkerMessage) => onMessage(slot, msg));
    slot.worker.on('error', (err: Error) => {
      slot.error = err;
    });
    slot.worker.on('exit', (code: number) => onExit(slot, code));
  }

  function replace(): void {
    replaced++;
    spawn();
  }

  function onMessage(slot: Slot, msg: WorkerMessage): void {
    if (slot.retired) return;
    if (msg.type === 'ready') {
      slot.ready = true;
      startFailures = 0;
      if (!started) {
        started = true;
        // The calls that waited for the start now wait for a free worker, as any call does.
        for (const job of queue) armWait(job, opts.queueWaitMs);
      }
      pump();
      return;
    }
    const job = slot.job;
    if (!job || job.request.id !== msg.id) return;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
    finish(job, { text: msg.text, elapsedMs: elapsed(job) });
    if (msg.fatal) retire(slot);
    pump();
  }

  function onExit(slot: Slot, code: number): void {
    if (slot.retired) return;
    slot.retired = true;
    slots.delete(slot);
    if (slot.timer) clearTimeout(slot.timer);
    const why = slot.error?.code === 'ERR_WORKER_OUT_OF_MEMORY'
      ? opts.memoryMessage
      : `script engine worker stopped (${slot.error?.message ?? `exit code ${code}`})`;
    if (slot.job) finish(slot.job, { failure: why, elapsedMs: elapsed(slot.job) });
    if (closed) return;
    if (slot.ready) replace();
    else startFailed(why);
  }

  /**
   * A worker that could not start: do not spin. Give up on the waiting calls after a
   * few failures in a row, and keep retrying, more slowly each time.
   */
  function startFailed(why: string): void {
    startFailures++;
    if (startFailures >= START_FAILURES_BEFORE_GIVING_UP) {
      for (const job of queue.splice(0)) finish(job, { failure: `script engine cannot start: ${why}`, elapsedMs: 0 });
    }
    const delay = Math.min(MAX_START_BACKOFF_MS, 250 * 2 ** (startFailures - 1));
    const timer = setTimeout(() => {
      restartTimers.delete(timer);
      replace();
    }, delay);
    timer.unref();
    restartTimers.add(timer);
  }

  /** Ends a worker that has not answered in time; its call answers the time limit. */
  function hardStop(slot: Slot): void {
    if (slot.retired) return;
    slot.timer = null;
    if (slot.job) finish(slot.job, { failure: opts.timeMessage, elapsedMs: elapsed(slot.job) });
    slot.job = null;
    retire(slot);
  }

  /** Takes a worker out of service at once (no call goes to it any more) and starts another. */
  function retire(slot: Slot): void {
    slot.retired = true;
    slots.delete(slot);
    track(slot.worker.terminate());
    replace();
  }

  function track(p: Promise<unknown>): void {
    const settled = p.catch(() => undefined).finally(() => exiting.delete(settled));
    exiting.add(settled);
  }

  function pump(): void {
    for (const slot of slots) {
      if (queue.length === 0) return;
      if (!slot.ready || slot.job || slot.retired) continue;
      const job = queue.shift()!;
      if (job.waitTimer) clearTimeout(job.waitTimer);
      job.waitTimer = null;
      slot.job = job;
      job.startedAt = performance.now();
      slot.worker.postMessage(job.request);
      slot.timer = setTimeout(() => hardStop(slot), opts.hardStopMs);
    }
  }

  /** Gives up on a queued call after `ms` (the queue wait, or the start wait before any worker is ready). */
  function armWait(job: Job, ms: number): void {
    if (job.waitTimer) clearTimeout(job.waitTimer);
    job.waitTimer = setTimeout(() => {
      const at = queue.indexOf(job);
      if (at >= 0) queue.splice(at, 1);
      job.waitTimer = null;
      job.resolve({ failure: started ? `script engine busy: no worker free within ${ms} ms` : `script engine cannot start: no worker ready within ${ms} ms`, elapsedMs: 0 });
    }, ms);
  }

  for (let i = 0; i < opts.workers; i++) spawn();

  return {
    submit(call) {
      if (closed) return Promise.reject(new Error('script engine is closed'));
      if (queue.length >= opts.maxQueued) {
        return Promise.resolve({ failure: `script engine busy: ${queue.length} calls already waiting`, elapsedMs: 0 });
      }
      return new Promise<PoolAnswer>((resolve) => {
        const job: Job = { request: { ...call, id: nextId++ }, resolve, waitTimer: null, startedAt: 0 };
        armWait(job, started ? opts.queueWaitMs : Math.max(opts.queueWaitMs, START_WAIT_MS));
        queue.push(job);
        pump();
      });
    },

    stats() {
      let ready = 0;
      let busy = 0;
      for (const s of slots) {
        if (s.ready) ready++;
        if (s.job) busy++;
      }
      return { workers: slots.size, ready, busy, queued: queue.length, replaced };
    },

    async close() {
      if (closed) return;
      closed = true;
      for (const timer of restartTimers) clearTimeout(timer);
      restartTimers.clear();
      for (const job of queue.splice(0)) finish(job, { failure: 'script engine closed', elapsedMs: 0 });
      for (const slot of slots) {
        slot.retired = true;
        if (slot.timer) clearTimeout(slot.timer);
        if (slot.job) finish(slot.job, { failure: 'script engine closed', elapsedMs: elapsed(slot.job) });
        slot.job = null;
        track(slot.worker.terminate());
      }
      slots.clear();
      await Promise.all([...exiting]);
    },
  };
}

/** The worker's file beside this one, as this one is (Node 24 strips the types of both). */
function startWorker(config: WorkerConfig): Worker {
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  return new Worker(new URL(`./worker.${ext}`, import.meta.url), { workerData: config, resourceLimits: { ...WORKER_RESOURCE_LIMITS } });
}
