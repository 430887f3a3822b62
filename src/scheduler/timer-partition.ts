import type { Job } from '../dispatchers/job.ts';
import { decodeJson } from '../lib/json.ts';
import { createLease, whileLeased, type Lease } from '../nats/lease.ts';
import type { KV } from '@nats-io/kv';
import { TimerHeap } from './timer-heap.ts';
import type { TimerStore, TimerValue } from './timer-store.ts';

export interface PartitionDeps {
  timers: TimerStore;
  /** Puts a due job to work (DISPATCH or its lane). */
  start: (job: Job) => Promise<void>;
  leases: KV;
  owner: string;
  log: (m: string) => void;
}

/**
 * Owns one timer partition while it holds the partition's lease: loads the
 * partition's pending timers (last value per subject), follows new ones live,
 * and fires each when due by moving its job to DISPATCH and deleting that exact
 * timer message. A timer replaced or purged meanwhile is skipped at fire time.
 */
export function runTimerPartition(partition: number, deps: PartitionDeps, signal: AbortSignal): Promise<void> {
  const lease: Lease = createLease(deps.leases, `timers.${partition}`, deps.owner);
  return whileLeased(lease, signal, deps.log, (run) => ownPartition(partition, deps, run));
}

async function ownPartition(partition: number, deps: PartitionDeps, signal: AbortSignal): Promise<void> {
  const heap = new TimerHeap<Job>();
  let timer: NodeJS.Timeout | undefined;
  let firing = false;

  const fire = async (job: Job, seq: number) => {
    if (!(await deps.timers.stillStored(seq))) return;
    await deps.start(job);
    await deps.timers.remove(seq);
  };

  const arm = () => {
    clearTimeout(timer);
    const due = heap.peekDue();
    if (due === undefined || signal.aborted) return;
    timer = setTimeout(() => void tick(), Math.max(0, due - Date.now()));
  };

  const tick = async () => {
    if (firing) return;
    firing = true;
    try {
      // Timers of one lane fire one after another in (due, write) order, so the lane's
      // queue receives them in creation order; everything else fires in parallel.
      const due = heap.popDue(Date.now()).sort((a, b) => a.due - b.due || a.seq - b.seq);
      const groups = new Map<string, typeof due>();
      for (const e of due) {
        const key = e.value.kind === 'attempt' && e.value.lane ? `${e.value.org_id}:${e.value.lane}` : e.key;
        const list = groups.get(key) ?? [];
        list.push(e);
        groups.set(key, list);
      }
      await Promise.all([...groups.values()].map(async (list) => {
        for (const e of list) {
          try {
            await fire(e.value, e.seq);
          } catch (err) {
            // Put it back: it stays stored, so trying again later is safe.
            deps.log(`timers.${partition}: firing ${e.key} failed: ${(err as Error).message}`);
            heap.set(e.key, e.seq, Date.now() + 1000, e.value);
          }
        }
      }));
    } finally {
      firing = false;
      arm();
    }
  };

  const consumer = await deps.timers.consumerFor(partition);
  const messages = await consumer.consume({ max_messages: 1000 });
  const onAbort = () => void messages.close();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const m of messages) {
      const value = decodeJson<TimerValue>(m.data);
      if (value.state === 'armed') heap.set(m.subject, m.seq, value.due_at, value.job);
      else heap.delete(m.subject);
      if (!firing) arm();
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    clearTimeout(timer);
  }
}
