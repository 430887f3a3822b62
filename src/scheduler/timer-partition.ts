import type { Job } from '../commands/execution/job.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import { POISON_AFTER, type Supervisor } from '../nats/supervisor.ts';
import type { Nats } from '../nats/connection.ts';
import { followOrdered } from '../nats/follow.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { LeasedConsumer } from '../nats/consumer-kit.ts';
import { heapAlarm, TimerHeap } from '../lib/timer-heap.ts';
import type { TimerStore, TimerValue } from './timer-store.ts';
import { inSpan, sourceAttributes, SpanKind } from '../telemetry/tracing.ts';
import { traceparentOf } from '../nats/follow.ts';

export interface PartitionDeps {
  timers: TimerStore;
  /** Puts a due job to work (DISPATCH or its lane). */
  start: (job: Job) => Promise<void>;
  log: (m: string) => void;
  supervisor: Supervisor;
  nats: Nats;
  /** The timers of every partition this process owns now (for the timer gauges). */
  owned: Set<TimerHeap<Job>>;
}

/**
 * Owns one timer partition while it holds the partition's lease: loads the
 * partition's pending timers (last value per subject), follows new ones live,
 * and fires each when due by moving its job to DISPATCH and deleting that exact
 * timer message. A timer replaced or purged meanwhile is skipped at fire time.
 */
export function timerPartition(partition: number, deps: PartitionDeps): LeasedConsumer {
  return { lease: `timers.${partition}`, term: (signal) => ownPartition(partition, deps, signal) };
}

async function ownPartition(partition: number, deps: PartitionDeps, signal: AbortSignal): Promise<void> {
  const heap = new TimerHeap<Job>();
  deps.owned.add(heap);
  let firing = false;
  const consumerName = `timers.${partition}`;
  const progress = deps.supervisor.progress(consumerName, 'TIMERS');
  progress.started(0);
  // Failed fires in a row per timer, for the supervisor's retry-or-skip.
  const tries = new Map<string, number>();
  const { supervisor } = deps;
  const stopRetries = supervisor.ledger.serveRetries(consumerName, (r) => deps.timers.republish(r.subject, Buffer.from(r.payload ?? '', 'base64')), deps.log);

  // The trace each armed timer continues (its message's header; only while tracing is on).
  const traceparents = new Map<string, string>();
  const fire = async (job: Job, seq: number, key: string) => {
    if (!(await deps.timers.stillStored(seq))) return;
    await inTimerSpan(job, traceparents.get(key), () => deps.start(job));
    await deps.timers.remove(seq);
  };

  const { arm, clear } = heapAlarm(heap, signal, () => void tick(), (due) => (progress.oldestDueAt = due));

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
            await fire(e.value, e.seq, e.key);
            tries.delete(e.key);
            progress.advanced(e.seq);
          } catch (err) {
            const n = (tries.get(e.key) ?? 0) + 1;
            tries.set(e.key, n);
            const item = { stream: 'TIMERS', seq: e.seq, subject: e.key, payload: encodeJson({ state: 'armed', due_at: e.due, job: e.value }) };
            const verdict = await supervisor.failed(consumerName, item, err, n);
            if (verdict.skip) {
              tries.delete(e.key);
              await deps.timers.remove(e.seq);
            } else if (!heap.has(e.key)) {
              // Put it back: it stays stored, so trying again later is safe. Unless a newer
              // value of the same timer came in while this one was firing (a retry's
              // timer written over the attempt's): putting the old one back would drop it.
              heap.set(e.key, e.seq, Date.now() + verdict.waitMs, e.value);
            }
          }
        }
      }));
    } finally {
      firing = false;
      arm();
    }
  };

  // The partition's pending timers (last value per subject), then new ones live; a lost
  // consumer is replaced from the next sequence (follow.ts). Ends when `signal` aborts.
  const messages = followOrdered(deps.nats, {
    stream: STREAMS.timers.name, filter: SUBJECTS.timerPartition(partition), lastPerSubject: true, startSeq: 1,
    maxMessages: 1000, signal, log: deps.log, name: consumerName,
  });
  try {
    for await (const m of messages) {
      let value: TimerValue;
      try {
        value = decodeJson<TimerValue>(m.data);
      } catch (err) {
        const item = { stream: 'TIMERS', seq: m.seq, subject: m.subject, payload: m.data };
        const verdict = await supervisor.failed(consumerName, item, err, POISON_AFTER);
        if (verdict.skip) await deps.timers.remove(m.seq);
        continue;
      }
      if (value.state === 'armed') heap.set(m.subject, m.seq, value.due_at, value.job);
      else heap.delete(m.subject);
      const traceparent = value.state === 'armed' ? traceparentOf(m) : undefined;
      if (traceparent) traceparents.set(m.subject, traceparent);
      else traceparents.delete(m.subject);
      if (!firing) arm();
    }
  } finally {
    deps.owned.delete(heap);
    stopRetries();
    progress.stopped();
    progress.oldestDueAt = null;
    clear();
  }
}

/**
 * A timer's job put to work inside a span: a delayed attempt or a retry continues the
 * trace that armed it; a cron tick or a monitor's deadline starts a trace of its own
 * (one per tick), linked to the one that armed it.
 */
function inTimerSpan(job: Job, traceparent: string | undefined, fn: () => Promise<void>): Promise<void> {
  const attributes = () => sourceAttributes(job.org_id, job.source, { 'jetcron.execution_id': job.execution_id });
  if (job.kind === 'tick' || job.kind === 'deadline') {
    return inSpan(job.kind === 'tick' ? 'schedule tick' : 'monitor deadline', { kind: SpanKind.INTERNAL, root: true, traceparent, attributes }, fn);
  }
  return inSpan('timer fired', { kind: SpanKind.INTERNAL, traceparent, attributes }, fn);
}
