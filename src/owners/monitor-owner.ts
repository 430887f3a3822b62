import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { childAbort } from '../lib/child-abort.ts';
import { appendEvents, commandMeta } from '../commands/execute.ts';
import { withEventId } from '../commands/meta.ts';
import { committed, HeldMonitors } from '../commands/monitor/held-monitors.ts';
import { monitorSubject } from '../commands/monitor/handlers.ts';
import { armedDeadline } from '../commands/monitor/runs.ts';
import { MONITOR_EVENT_TYPES, type MonitorEvent } from '../commands/monitor/types.ts';
import type { Envelope } from '../commands/envelope.ts';
import { ConcurrencyError, type EventStore } from '../commands/store.ts';
import type { Clock } from '../lib/clock.ts';
import { ApiError } from '../lib/errors.ts';
import { decodeJson } from '../lib/json.ts';
import { heapAlarm, TimerHeap } from '../lib/timer-heap.ts';
import type { Nats } from '../nats/connection.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import { decodeEvents } from '../nats/event-reader.ts';
import { followOrdered } from '../nats/follow.ts';
import { lastPerSubject } from '../nats/last-per-subject.ts';
import { shareMonitorSubjectsRead } from './monitor-subjects-read.ts';
import { claimPartition, Fenced } from './partition-log.ts';
import type { MonitorReplies, MonitorReply, MonitorRequest, MonitorRequests } from './monitor-wire.ts';

export interface MonitorOwnersDeps {
  nats: Nats;
  store: EventStore;
  clock: Clock;
  owner: string;
  log: (m: string) => void;
  partitions: number;
  /** The least age, in commit events, at which an owner restates a monitor (`HeldMonitors.restates`); tests lower it. */
  restateAfter?: number;
}

/** The lease of a monitor partition's owner. */
export const monitorOwnerLease = (partition: number) => `monitor-owner.${partition}`;

/** A change written on a monitor's own subject that met another writer there is decided again, at most so many times. */
const OWN_SUBJECT_TRIES = 5;
/** A deadline whose commit failed otherwise than by a fence is tried again this much later. */
const RETRY_MS = 500;
/** A due deadline of a monitor with a change under way looks again this much later. */
const BUSY_RETRY_MS = 20;
/**
 * How long a going down a deadline decided (and a restatement) may wait for a commit the
 * turn's pings make anyway: nobody waits for its answer, its time is the decision's
 * (`updated_at`, what down detection measures), and only its notification goes out so
 * much later. Half of a bench's events are such goings down.
 */
const UNANSWERED_WITHIN_MS = 10;

/** Not this owner's to answer any more (fenced, lease lapsed, stopping): the asker asks again. */
class NotOwner extends Error {}

/**
 * Every monitor partition this process can lease, each owned while its lease holds
 * (`ownMonitorPartition`). `counts` sums the deadlines of those owned here.
 */
export function startMonitorOwners(deps: MonitorOwnersDeps) {
  const owned = new Map<number, OwnedPartition>();
  const subjects = shareMonitorSubjectsRead((signal, take) => lastPerSubject(deps.nats, SUBJECTS.monitors, signal, take), deps.partitions);
  const owners = startConsumers(deps, Array.from({ length: deps.partitions }, (_, p) => ({
    lease: monitorOwnerLease(p),
    term: (signal: AbortSignal, _opened: unknown, lease: { held(): boolean }) => ownMonitorPartition(deps, p, lease, signal, owned, subjects.lastOfEach),
  })));
  return {
    /** The partitions owned live here now, to be asked without a NATS round trip (`createMonitorOwnerClient`). */
    local: (partition: number): OwnedPartition | undefined => owned.get(partition),
    /** The deadlines kept here (null: no partition owned here). */
    counts(now = Date.now()): { armed: number; overdue: number } | null {
      if (owned.size === 0) return null;
      let armed = 0;
      let overdue = 0;
      for (const { deadlines } of owned.values()) {
        armed += deadlines.size;
        overdue += deadlines.countDue(now);
      }
      return { armed, overdue };
    },
    stop: () => owners.stop(),
  };
}

/** A partition owned live in this process: its deadlines, its commands answered in-process, and the creates made here. */
export interface OwnedPartition {
  deadlines: TimerHeap<string>;
  answer(items: MonitorRequest[]): Promise<MonitorReply[]>;
  created(event: MonitorEvent, seq: number): void;
}

const monitorIdOf = (e: MonitorEvent): string => e.data.monitor.id;

/**
 * Owns one monitor partition while `lease` holds: claims the partition's log (which fences
 * the previous owner's commits), reads the last event of each of its monitors' own subjects
 * and the partition's commits from where the last owner's last commit says, then, once
 * past its own claim, answers the partition's commands (core NATS requests from the API
 * processes) and decides its deadlines. Pings and goings down are held in memory at once
 * and stored in group commits on the partition's subject (one message for all of a
 * turn); a change of a monitor is written on its own subject, after any commit of its
 * still on the way. Every answer is sent once what it says is stored.
 */
export async function ownMonitorPartition(
  deps: MonitorOwnersDeps,
  partition: number,
  lease: { held(): boolean },
  signal: AbortSignal,
  exposed: Map<number, OwnedPartition>,
  lastOfEach: ReturnType<typeof shareMonitorSubjectsRead>['lastOfEach'],
): Promise<void> {
  const { controller: stop, release } = childAbort(signal);
  const own = SUBJECTS.monitorPartition(partition);
  const log = await claimPartition({ nats: deps.nats, store: deps.store }, { partition, owner: deps.owner, signal: stop.signal, subject: own }).catch((err: unknown) => {
    release();
    throw err;
  });
  deps.log(`monitor owner of partition ${partition}: claimed at seq ${log.claimSeq}`);
  const monitors = new HeldMonitors(deps.restateAfter);
  const deadlines = new TimerHeap<string>();
  let version = 0;
  let live = false;
  let commitIndex = 0;
  /** Monitors with a load or a change on its own subject under way: what comes for them next waits its turn. */
  const chains = new Map<string, Promise<unknown>>();
  /** Commands decided and not yet stored, by request id: a retry arriving meanwhile gets the same answer. */
  const inFlight = new Map<string, Promise<MonitorReply>>();
  /** The commit of each monitor's last held decision, while on its way: a change on its own subject waits for it. */
  const commits = new Map<string, Promise<number>>();

  const ending = (why: string) => {
    if (stop.signal.aborted) return;
    deps.log(`monitor owner of partition ${partition}: ${why}; stopping`);
    stop.abort();
  };

  const alarm = heapAlarm(deadlines, stop.signal, () => void tick());
  /** The monitor's deadline, as its held state says (none: nothing to watch). */
  const watch = (id: string) => {
    const deadline = armedDeadline(monitors.get(id)?.state ?? null);
    if (!deadline) return deadlines.delete(id);
    const due = Date.parse(deadline);
    deadlines.set(id, ++version, due, deadline);
    if (live && !firing) alarm.earlier(due);
  };

  const readMessage = (seq: number, events: Envelope[], ownSubject: boolean) => {
    events.forEach((e, index) => {
      if (!MONITOR_EVENT_TYPES.has(e.type)) return;
      const id = monitorIdOf(e as MonitorEvent);
      if (monitors.read(id, seq, index, e as MonitorEvent, ownSubject)) watch(id);
    });
  };

  const decoded = (item: { seq: number; data: Uint8Array; decoded?: unknown }): Envelope[] => {
    try {
      return (item.decoded ??= decodeEvents(item.data)) as Envelope[];
    } catch (err) {
      deps.log(`monitor owner of partition ${partition}: seq ${item.seq}: ${(err as Error).message}; skipped`);
      return [];
    }
  };

  /** A decision bound for the partition's commit: held now, answered once stored; with it go the restatements due by then. */
  const commit = (id: string, event: MonitorEvent, withinMs = 0): Promise<number> => {
    const stored = place(id, event, withinMs);
    // A monitor with a change or a load under way (`chains`) waits: its own subject may be written meanwhile.
    for (const restated of monitors.restates(() => new Date(deps.clock.now()).toISOString(), (id) => chains.has(id))) {
      place(monitorIdOf(restated), restated, UNANSWERED_WITHIN_MS).catch((err: unknown) => {
        // Lost with its commit (a fence, a stop): the next owner reads back further, nothing more.
        if (!(err instanceof Fenced || stop.signal.aborted)) deps.log(`monitor owner of partition ${partition}: a restatement of ${monitorIdOf(restated)}: ${(err as Error).message}`);
      });
    }
    return stored;
  };

  const place = (id: string, event: MonitorEvent, withinMs: number): Promise<number> => {
    monitors.hold(id, event);
    watch(id);
    const index = commitIndex++;
    const settled = () => {
      if (commits.get(id) === stored) commits.delete(id);
    };
    // Every caller handles the rejection (an answer, a retried deadline, a logged restatement).
    const stored: Promise<number> = log.append([event], withinMs).then((seq) => {
      monitors.stored(id, event, seq, index);
      settled();
      return seq;
    }, (err: unknown) => {
      settled();
      if (err instanceof Fenced) ending('another owner claimed the partition');
      throw err;
    });
    commits.set(id, stored);
    return stored;
  };

  const refusal = (err: unknown): MonitorReply => {
    if (err instanceof ApiError) return { error: { status: err.status, message: err.message, field: err.field, headers: err.headers } };
    throw err;
  };

  /** Whether the monitor is held, or known to be nowhere; else it is loaded first (`slow`). */
  const known = (r: MonitorRequest) => monitors.get(r.id) !== undefined;

  /** A command decided at once, in arrival order, when nothing for its monitor is under way. */
  const decideCommitted = (r: MonitorRequest): Promise<MonitorReply> => {
    let events: MonitorEvent[];
    try {
      events = monitors.decide(r.org_id, r.id, r.command, withEventId(commandMeta(deps.clock), r.request_id));
    } catch (err) {
      return Promise.resolve(refusal(err));
    }
    const event = events[0];
    if (!event) return Promise.resolve({ seq: monitors.get(r.id)?.seq ?? 0, events: [], state: monitors.stateOf(r.org_id, r.id) });
    return commit(r.id, event).then((seq) => ({ seq, events: [event] }));
  };

  /** A change of the monitor, on its own subject, once its pings on the way are stored; guarded by that subject's sequence. */
  const decideOwn = async (r: MonitorRequest): Promise<MonitorReply> => {
    const subject = monitorSubject(r.org_id, r.id);
    for (let tries = 1; ; tries++) {
      await commits.get(r.id);
      // Asked right before the write: a process resumed after a freeze must not write what it decided before.
      if (stop.signal.aborted || !lease.held()) throw new NotOwner('not the owner');
      let events: MonitorEvent[];
      try {
        events = monitors.decide(r.org_id, r.id, r.command, withEventId(commandMeta(deps.clock), r.request_id));
      } catch (err) {
        return refusal(err);
      }
      if (events.length === 0) return { seq: monitors.get(r.id)?.seq ?? 0, events: [], state: monitors.stateOf(r.org_id, r.id) };
      try {
        const seq = await appendEvents(deps.store, subject, events, monitors.get(r.id)?.ownSeq ?? 0);
        events.forEach((e, i) => monitors.read(r.id, seq, i, e, true));
        watch(r.id);
        return { seq, events };
      } catch (err) {
        // Another writer of the subject (a deadline timer of before the owners): read it and decide again.
        if (!(err instanceof ConcurrencyError) || tries >= OWN_SUBJECT_TRIES) throw err;
        monitors.loaded(r.id, await deps.store.last<MonitorEvent>(subject));
      }
    }
  };

  /** Loads a monitor this owner has not seen (created a moment ago: its create may still be on the way here). */
  const load = async (r: MonitorRequest) => {
    if (known(r)) return;
    monitors.loaded(r.id, await deps.store.last<MonitorEvent>(monitorSubject(r.org_id, r.id)));
    watch(r.id);
  };

  const slow = async (r: MonitorRequest): Promise<MonitorReply> => {
    await load(r);
    return committed(r.command) ? decideCommitted(r) : decideOwn(r);
  };

  /** One command: answered from the log if already stored, else decided in its monitor's order. */
  const handle = (r: MonitorRequest): Promise<MonitorReply> => {
    const stored = monitors.answered(r.request_id);
    if (stored) return Promise.resolve({ seq: stored.seq, events: [stored.event] });
    const pending = inFlight.get(r.request_id);
    if (pending) return pending;
    const before = chains.get(r.id);
    let reply: Promise<MonitorReply>;
    if (!before && known(r) && committed(r.command)) reply = decideCommitted(r);
    else {
      reply = (before ?? Promise.resolve()).then(() => slow(r));
      const tail = reply.catch(() => {});
      chains.set(r.id, tail);
      void tail.then(() => {
        if (chains.get(r.id) === tail) chains.delete(r.id);
      });
    }
    inFlight.set(r.request_id, reply);
    const done = () => inFlight.delete(r.request_id);
    void reply.then(done, done);
    return reply;
  };

  const answer = (items: MonitorRequest[]): Promise<MonitorReply[]> => Promise.all(items.map((r) => handle(r).catch((err: unknown): MonitorReply => {
    if (!(err instanceof NotOwner || err instanceof Fenced || stop.signal.aborted)) deps.log(`monitor owner of partition ${partition}: ${r.id}: ${(err as Error).message}`);
    return { retry: (err as Error).message };
  })));

  /** A monitor just created by this process (its create stored at `seq`): held from now, no load at its first ping. */
  const created = (event: MonitorEvent, seq: number) => {
    if (monitors.read(monitorIdOf(event), seq, 0, event, true)) watch(monitorIdOf(event));
  };

  let firing = false;
  const tick = async () => {
    if (firing || stop.signal.aborted) return;
    if (!lease.held()) return ending('its lease has lapsed');
    firing = true;
    try {
      for (const due of deadlines.popDue(Date.now())) {
        const state = monitors.get(due.key)?.state ?? null;
        // Moved meanwhile (a ping, a pause): watched again from its event.
        if (armedDeadline(state) !== due.value) {
          watch(due.key);
          continue;
        }
        // A change of it under way: decided once that is through (it may move the deadline).
        if (chains.has(due.key)) {
          deadlines.set(due.key, ++version, Date.now() + BUSY_RETRY_MS, due.value);
          continue;
        }
        const events = monitors.decide(state!.org_id, due.key, { type: 'CheckDeadline', deadlineAt: due.value }, commandMeta(deps.clock));
        if (events[0]) {
          commit(due.key, events[0], UNANSWERED_WITHIN_MS).catch((err: unknown) => {
            if (err instanceof Fenced || stop.signal.aborted) return;
            deps.log(`monitor owner of partition ${partition}: the going down of ${due.key}: ${(err as Error).message}; trying again`);
            setTimeout(() => watch(due.key), RETRY_MS);
          });
        } else watch(due.key);
      }
    } finally {
      firing = false;
      alarm.arm();
    }
  };

  let subscription: { unsubscribe(): void } | undefined;
  const goLive = (readBack: { commits: number; events: number; from: number }) => {
    live = true;
    exposed.set(partition, { deadlines, answer, created });
    subscription = deps.nats.nc.subscribe(SUBJECTS.monitorOwner(partition), {
      callback: (_err, m) => {
        let items: MonitorRequest[];
        try {
          items = decodeJson<MonitorRequests>(m.data).items;
        } catch {
          return;
        }
        void answer(items).then((answers) => {
          if (m.reply) m.respond(JSON.stringify({ answers } satisfies MonitorReplies));
        });
      },
    });
    alarm.arm();
    deps.log(`monitor owner of partition ${partition}: live with ${monitors.size} monitors, ${deadlines.size} deadlines; read back ${readBack.commits} commits (${readBack.events} events) from seq ${readBack.from}`);
  };

  try {
    // The claim came first, so the last event of each of the partition's monitors on its own
    // subject, read now (one read for the partitions of this process taken over together),
    // is at least as new as the claim; then the partition's commits from where its last
    // commit says (a partition never claimed before has none).
    await lastOfEach(partition, stop.signal, (m) => readMessage(m.seq, decoded(m), true));
    if (stop.signal.aborted) return;
    const start = log.afterSeq === 0 ? log.claimSeq : Math.min(log.resumeFrom, log.claimSeq);
    // Every commit here is this owner's own once live: a takeover reads from the lowest commit
    // holding a monitor's latest event (kept near the end by the restatements), else from this owner's last one.
    log.resumeFromNow = () => Math.min(monitors.lowestCommit() ?? log.tail, log.tail);
    const readBack = { commits: 0, events: 0, from: start };
    // Only the partition's subject, read up to the claim: the server passes over the rest of
    // the log. Past the claim, every commit is this owner's own, held when it was decided, and
    // every later write of its monitors is its own too (commands come to it), or a create,
    // handed over by the API process that made it or loaded at the monitor's first command.
    if (start < log.claimSeq) {
      for await (const m of followOrdered(deps.nats, { stream: STREAMS.events.name, startSeq: start, filter: own, signal: stop.signal, log: deps.log, name: `monitor-owner.${partition}`, maxMessages: 1_000 })) {
        if (m.seq >= log.claimSeq) break;
        const events = decoded({ seq: m.seq, data: m.data });
        readMessage(m.seq, events, false);
        readBack.commits++;
        readBack.events += events.length;
      }
    }
    if (!stop.signal.aborted) goLive(readBack);
    // Owned until the lease is lost or the process stops (the consumer kit aborts `signal`), or a commit is fenced.
    await new Promise<void>((resolve) => (stop.signal.aborted ? resolve() : stop.signal.addEventListener('abort', () => resolve(), { once: true })));
  } finally {
    subscription?.unsubscribe();
    exposed.delete(partition);
    release();
    stop.abort();
    alarm.clear();
    // What is on its way may still be stored; its askers get their answers or ask again.
    await Promise.race([Promise.allSettled([...inFlight.values()]), new Promise((r) => setTimeout(r, 5_000))]);
    log.close();
  }
}
