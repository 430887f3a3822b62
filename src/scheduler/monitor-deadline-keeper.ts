import { STREAMS } from '../../streams/definitions.ts';
import { isMonitorSubject, SUBJECTS } from '../../streams/subjects.ts';
import { appendEvents, commandMeta, type CommandDeps } from '../commands/execute.ts';
import { decideMonitor, evolveMonitor } from '../commands/monitor/decide.ts';
import { armedDeadline } from '../commands/monitor/runs.ts';
import type { Monitor, MonitorEvent } from '../commands/monitor/types.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { heapAlarm, TimerHeap } from '../lib/timer-heap.ts';
import type { Nats } from '../nats/connection.ts';
import { decodeEvents } from '../nats/event-reader.ts';
import { followEventBatches } from '../nats/events-tap.ts';
import type { JsMsg } from '@nats-io/jetstream';
import { lastPerSubject } from '../nats/last-per-subject.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { inSpan, sourceAttributes, SpanKind } from '../telemetry/tracing.ts';

/** The lease, and the name the keeper reports its progress under (`/healthz`). */
export const KEEPER = 'monitor-deadlines';
/** Deadlines decided at once: a second of goings down (1,000 monitors) must not time out each other's 2 s JetStream calls. */
const FIRES_IN_FLIGHT = 32;
/** A fire that failed otherwise than by a newer event (a store unreachable) is tried again this much later. */
const RETRY_MS = 500;

/** What a deadline is decided from: the monitor as its last event carries it, and that event's sequence (the guard). */
export interface Head {
  state: Monitor;
  seq: number;
}

export interface DeadlineCounts {
  armed: number;
  overdue: number;
}

/**
 * Every monitor's deadline, held in memory by the one process holding the
 * `monitor-deadlines` lease, instead of a TIMERS message rewritten by the translator
 * at every ping (a write, a delivery to a timer partition, a direct get and a delete
 * per ping). Taking the lease reads the last event of every monitor subject, then
 * follows the log through the process's events tap: each monitor event replaces its
 * monitor's deadline (or removes it), so the heap is what the log says, rebuilt by
 * whoever takes over after a crash. A ping that moves a deadline later leaves the
 * alarm as it is; it wakes, finds nothing due and looks again.
 *
 * When a deadline comes due, `CheckDeadline` is decided on the state of the event the
 * keeper last read and appended guarded by that event's sequence: no load. A newer event
 * (a ping at the same moment) makes the append fail; that event is on its way to the
 * keeper, which then keeps its deadline instead, so the ping wins as before. The
 * decision and its id (`<mon>.down.<deadline>`) are the deciders', unchanged.
 */
export function startMonitorDeadlines(deps: {
  nats: Nats;
  store: EventStore;
  clock: Clock;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
}) {
  let current: TimerHeap<Head> | null = null;
  const keeper = startConsumers(deps, [{ lease: KEEPER, term: (signal) => keep(deps, signal, (heap) => (current = heap)) }]);
  return {
    /** The deadlines this process keeps (null: another process holds the lease). */
    counts(now = Date.now()): DeadlineCounts | null {
      return current && { armed: current.size, overdue: current.countDue(now) };
    },
    stop: () => keeper.stop(),
  };
}

/**
 * `CheckDeadline` on the monitor as the keeper last read it, appended guarded by that
 * event's sequence. "newer" when the subject moved on (a ping, a pause at the same
 * moment): nothing is written, and the newer event, on its way to the keeper, says
 * what to watch next. Another failure (the store unreachable) is thrown.
 */
export async function decideDueDeadline(deps: CommandDeps, subject: string, head: Head): Promise<'decided' | 'newer'> {
  const events = decideMonitor({ type: 'CheckDeadline', deadlineAt: head.state.deadline_at! }, head.state, commandMeta(deps.clock));
  try {
    if (events.length) await appendEvents(deps.store, subject, events, head.seq);
    return 'decided';
  } catch (err) {
    if (err instanceof ConcurrencyError) return 'newer';
    throw err;
  }
}

async function keep(
  deps: Parameters<typeof startMonitorDeadlines>[0],
  signal: AbortSignal,
  expose: (heap: TimerHeap<Head> | null) => void,
): Promise<void> {
  const heap = new TimerHeap<Head>();
  expose(heap);
  const progress = deps.supervisor.progress(KEEPER, null);
  progress.started(0);
  let firing = false;
  let failures = 0;

  /** Decides one due deadline; true when it needs trying again (nothing newer says otherwise). */
  const fire = (subject: string, head: Head): Promise<boolean> => {
    const m = head.state;
    const attributes = () => sourceAttributes(m.org_id, { type: 'monitor', id: m.id }, { 'jetcron.deadline_at': m.deadline_at ?? '' });
    return inSpan('monitor deadline', { kind: SpanKind.INTERNAL, root: true, attributes }, async () => {
      try {
        await decideDueDeadline(deps, subject, head);
        return false;
      } catch (err) {
        // Stopping (the lease lost, the process ending): the next keeper decides it.
        if (signal.aborted) return false;
        if (failures++ % 100 === 0) deps.log(`${KEEPER}: ${subject}: ${(err as Error).message}; trying again`);
        progress.failing((err as Error).message);
        return true;
      }
    });
  };

  const { arm, earlier, clear } = heapAlarm(heap, signal, () => void tick(), (due) => (progress.oldestDueAt = due));

  const tick = async () => {
    if (firing) return;
    firing = true;
    try {
      const due = heap.popDue(Date.now());
      let next = 0;
      const worker = async () => {
        for (let e = due[next++]; e; e = due[next++]) {
          // Still failing and nothing newer came meanwhile: it stays due, a little later.
          if ((await fire(e.key, e.value)) && !heap.has(e.key)) heap.set(e.key, e.seq, Date.now() + RETRY_MS, e.value);
        }
      };
      await Promise.all(Array.from({ length: Math.min(FIRES_IN_FLIGHT, due.length) }, worker));
    } finally {
      firing = false;
      arm();
    }
  };

  /** One monitor message: its last event says the deadline to keep, or that there is none. */
  const read = (subject: string, seq: number, decoded: () => unknown[]) => {
    let events: MonitorEvent[];
    try {
      events = decoded() as MonitorEvent[];
    } catch (err) {
      deps.log(`${KEEPER}: seq ${seq}: ${(err as Error).message}; skipped`);
      return;
    }
    const state = events.length ? evolveMonitor(null, events[events.length - 1]!) : null;
    const deadline = armedDeadline(state);
    if (deadline) {
      const due = Date.parse(deadline);
      heap.set(subject, seq, due, { state: state!, seq });
      // A later deadline (a ping moving it on) leaves the alarm as it is: it finds nothing due then and looks again.
      if (!firing) earlier(due);
    } else heap.delete(subject);
  };

  try {
    // Every monitor's last message up to the log's end now, then the rest of the log from
    // the process's events tap (shared with the projector, translator and notifier: one
    // delivery and one decode per message), monitor subjects only.
    const end = await lastOfEachMonitor(deps.nats, signal, (m) => read(m.subject, m.seq, () => decodeEvents(m.data)));
    if (signal.aborted) return;
    progress.advanced(end);
    arm();
    for await (const batch of followEventBatches(deps.nats, { startSeq: end + 1, signal, log: deps.log, name: KEEPER, maxMessages: 1000 })) {
      for (const item of batch) if (isMonitorSubject(item.subject)) read(item.subject, item.seq, () => (item.decoded ??= decodeEvents(item.data)) as unknown[]);
      progress.advanced(batch[batch.length - 1]!.seq);
    }
  } finally {
    expose(null);
    progress.stopped();
    progress.oldestDueAt = null;
    clear();
  }
}

/** The last message of every monitor subject stored up to the log's end as it is now; returns that end (`lastPerSubject`). */
export function lastOfEachMonitor(nats: Nats, signal: AbortSignal, take: (m: JsMsg) => void): Promise<number> {
  return lastPerSubject(nats, SUBJECTS.monitors, signal, take);
}
