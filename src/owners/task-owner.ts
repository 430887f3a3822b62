import type { LimitFunction } from 'p-limit';
import { isMonitorSubject, SUBJECTS } from '../../streams/subjects.ts';
import { childAbort } from '../lib/child-abort.ts';
import { planAttempt } from '../commands/execution/decide.ts';
import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import { adoptedResult, canBeLate, lateResult } from '../commands/execution/late-results.ts';
import { OwnedTasks, type OwnedExecution } from '../commands/partition/owned-tasks.ts';
import { TASK_EVENT_TYPES, type TaskEvent } from '../commands/task/types.ts';
import { evolveTask } from '../commands/task/decide.ts';
import { lastTaskEventAt } from '../commands/task/load.ts';
import type { AttemptRunner } from '../dispatchers/attempt-runner.ts';
import { NotSent } from '../dispatchers/outbound-client.ts';
import type { HostBlocks } from '../dispatchers/host-blocks.ts';
import type { EventStore } from '../commands/store.ts';
import type { JetcronEvent } from '../commands/events.ts';
import type { Clock } from '../lib/clock.ts';
import type { Log } from '../lib/logger.ts';
import { unreachable } from '../lib/unreachable.ts';
import { inSpan, sourceAttributes, SpanKind } from '../telemetry/tracing.ts';
import type { Nats } from '../nats/connection.ts';
import type { ConsumerProgress } from '../nats/supervisor.ts';
import { decodeEvents } from '../nats/event-reader.ts';
import { followEventBatches, type TapItem } from '../nats/events-tap.ts';
import { claimPartition, Fenced, type PartitionLog } from './partition-log.ts';
import { FLOW_KEY_EVENT_TYPES, type FlowKeyEvent } from '../commands/flow-control/types.ts';
import { readFlowKeyStates } from './flow-key-states.ts';
import { evolveEndpoint } from '../commands/endpoint/decide.ts';
import { ENDPOINT_EVENT_TYPES, type EndpointEvent } from '../commands/endpoint/types.ts';
import { loadForwardRequest } from '../dispatchers/inbound-request.ts';
import { SCHEDULE_EVENT_TYPES, type ScheduleEvent } from '../commands/schedule/types.ts';
import { recordTick } from '../commands/schedule/handlers.ts';
import type { DueTick } from '../commands/partition/owned-schedules.ts';
import { lastPerSubject } from '../nats/last-per-subject.ts';
import { endpointPartition } from '../commands/partition/partition-of.ts';
import { STREAMS } from '../../streams/definitions.ts';
import type { HandoffEvent } from '../commands/partition/types.ts';
import { readUntilDone } from '../lib/read-until-done.ts';

export interface TaskOwnerDeps {
  nats: Nats;
  store: EventStore;
  runner: AttemptRunner;
  hosts: () => HostBlocks;
  clock: Clock;
  log: Log;
  /** The process's bound on attempts in flight, shared by all its owners. */
  slots: LimitFunction;
  owner: string;
  partitions: number;
  onAttemptFinished?: (result: AttemptResult, exchangeMs: number | null) => void;
  /** Where this partition's reading of EVENTS stands, for `/healthz` (absent: not reported). */
  progress?: ConsumerProgress;
}

/** A start that failed for a reason of our own (the organization unreadable) is tried again after this. */
const RETRY_START_MS = 5_000;
/** Longer timers overflow (Node fires them at once); a far due time is looked at again after this. */
const MAX_SLEEP_MS = 3_600_000;

/** Every partition's log subject starts so (`evt.partition.<p>`). */
const PARTITION_SUBJECTS = SUBJECTS.partition(0).slice(0, -1);
/** Every monitor partition's log (`evt.monitor-partition.<p>`): pings and goings down, the monitor owners'. */
const MONITOR_PARTITION_SUBJECTS = SUBJECTS.monitorPartition(0).slice(0, -1);

const RESULT_EVENTS = new Set<JetcronEvent['type']>(['AttemptStarted', 'AttemptFinished', 'AttemptDeferred', 'ExecutionCancelled', 'CallbackAttempted']);

/** Per message read: whether it holds only inbound events that plan no delivery (collect-only, filtered, rejected). */
const plansNothing = new WeakMap<TapItem, boolean>();

/**
 * A message no owner acts on: every owner of the process reads every message, and under
 * inbound load most are commits of collect-only requests. Decided once per message for
 * all of them; such a message changes no owner's state, so it needs no pump either.
 */
function nothingToOwn(item: TapItem, events: JetcronEvent[]): boolean {
  let nothing = plansNothing.get(item);
  if (nothing === undefined) {
    nothing = events.length > 0 && events.every((e) => (e.type === 'InboundEventReceived' || e.type === 'InboundEventReplayed') && !e.data.executions.length);
    plansNothing.set(item, nothing);
  }
  return nothing;
}

/**
 * Owns one partition of tasks while `lease` holds: claims the partition's log (which
 * fences every earlier owner), reads EVENTS from where the last owner's last commit
 * says, and once it has read past its own claim (so everything its predecessor
 * recorded is applied) sends what is due and appends the results in group commits.
 * A lane's next execution starts only once the commit holding the previous one's
 * final result is stored. Returns when `signal` aborts, the lease lapses, or another
 * owner fences this one.
 */
export async function ownTaskPartition(
  deps: TaskOwnerDeps,
  partition: number,
  lease: { held(): boolean },
  signal: AbortSignal,
  held: Map<number, OwnedTasks>,
): Promise<void> {
  const { controller: stop, release } = childAbort(signal);
  const log = await claimPartition({ nats: deps.nats, store: deps.store }, { partition, owner: deps.owner, signal: stop.signal }).catch((err: unknown) => {
    release();
    throw err;
  });
  const state = new OwnedTasks(partition, deps.partitions, log.resumeFrom);
  // Before the log: a key paused long ago is paused still (the log replays later changes on top).
  try {
    for (const e of await readFlowKeyStates(deps.nats)) state.onFlowKeyEvent(e);
    // Every schedule as it is now: one created long before the oldest live execution still ticks.
    await lastPerSubject(deps.nats, SUBJECTS.schedules, stop.signal, (m) => {
      for (const e of decodeEvents(m.data) as JetcronEvent[]) if (SCHEDULE_EVENT_TYPES.has(e.type)) state.knowSchedule(e as ScheduleEvent, m.seq);
    });
  } catch (err) {
    log.close();
    release();
    throw err;
  }
  // One line per claim: a hand-off is rare and worth seeing in the log (a start, a lapsed lease, a takeover).
  deps.log(`owner of partition ${partition}: claimed at seq ${log.claimSeq}, reading from ${log.resumeFrom}`);
  held.set(partition, state);
  const own = SUBJECTS.partition(partition);
  let position = log.resumeFrom;
  deps.progress?.started(position - 1);
  let live = false;
  let pumpQueued = false;
  let wake: NodeJS.Timeout | undefined;
  let wakeAt = Infinity;
  const inFlight = new Set<Promise<void>>();
  log.resumeFromNow = () => state.lowestOrigin() ?? position;

  const ending = (why: string) => {
    if (stop.signal.aborted) return;
    deps.log(`owner of partition ${partition}: ${why}; stopping`);
    stop.abort();
  };

  /**
   * Appends and, once stored, applies: the state follows the log, never ahead of it. A
   * lane's head handed in by another partition has its result on its own subject, where
   * its lane's owner reads it.
   */
  const record = async (events: ExecutionEvent[]) => {
    const handed = events.filter((e) => state.handedIn(e.data.execution_id));
    const owned = handed.length ? events.filter((e) => !handed.includes(e)) : events;
    try {
      if (owned.length) await log.append(owned);
    } catch (err) {
      if (err instanceof Fenced) await recordLate(owned);
      throw err;
    }
    for (const e of handed) await deps.store.append(SUBJECTS.execution(e.org_id, e.data.execution_id), e);
    for (const e of events) state.onResult(e);
    schedulePump();
  };

  /** Lane heads handed to their key's partition, each on its execution's subject; one not stored is handed over again later. */
  const handOver = async (events: HandoffEvent[]) => {
    for (const e of events) {
      await deps.store.append(SUBJECTS.execution(e.org_id, e.data.execution_id), e).catch((err: unknown) => {
        deps.log(`owner of partition ${partition}: hand-off of ${e.data.execution_id} not stored: ${(err as Error).message}`);
        state.handOffFailed(e.data.execution_id, deps.clock.now() + RETRY_START_MS);
        schedulePump();
      });
    }
  };

  /**
   * Fenced with a result in hand: the request went out, so what it got is true, and the
   * log keeps it on the execution's own subject (the next owner applies results read
   * there, unless it is sending that execution itself). Without this, a delivery sent
   * just before a hand-off and then cancelled by its successor had no attempt recorded.
   */
  const recordLate = async (events: ExecutionEvent[]) => {
    for (const e of events) {
      if (!canBeLate(e)) continue;
      await deps.store.append(SUBJECTS.execution(e.org_id, e.data.execution_id), lateResult(e))
        .catch((err: unknown) => deps.log(`owner of partition ${partition}: the late result of ${e.data.execution_id} was not stored: ${(err as Error).message}`));
    }
  };

  const schedulePump = () => {
    if (pumpQueued || !live) return;
    pumpQueued = true;
    setImmediate(pump);
  };

  function pump() {
    pumpQueued = false;
    if (stop.signal.aborted) return;
    // Asked before anything is sent: a process resumed after a freeze must not act on what it held.
    if (!lease.held()) return ending('its lease has lapsed');
    const { cancels, starts, ticks, handoffs, wakeAt: next } = state.step(deps.clock.now());
    if (cancels.length) track(record(cancels));
    for (const exec of starts) track(run(exec));
    for (const tick of ticks) track(recordDueTick(tick));
    if (handoffs.length) track(handOver(handoffs));
    if (next !== null && next < wakeAt) {
      clearTimeout(wake);
      wakeAt = next;
      wake = setTimeout(() => {
        wakeAt = Infinity;
        schedulePump();
      }, Math.min(MAX_SLEEP_MS, Math.max(0, next - deps.clock.now())));
    }
  }

  /** The fence at the socket: whatever paused this process since the pump, nothing is written once the lease has lapsed. */
  const mayWrite = () => !stop.signal.aborted && lease.held();

  /**
   * A schedule's tick came due: recorded on the schedule's subject (guarded there, so a
   * stale owner firing it too stores one tick); its `ScheduleTicked`, read back from
   * the log, plans the execution. The state the recording found arms the next tick.
   */
  async function recordDueTick(tick: DueTick): Promise<void> {
    if (!mayWrite()) return;
    try {
      // A trace of its own per tick (its ScheduleTicked carries it on to the attempt).
      const attributes = () => ({ 'jetcron.org_id': tick.orgId, 'jetcron.schedule_id': tick.scheduleId, 'jetcron.partition': partition });
      const decided = await inSpan('schedule tick', { kind: SpanKind.INTERNAL, root: true, attributes }, () =>
        recordTick({ store: deps.store, clock: deps.clock }, tick.orgId, tick.scheduleId, tick.tickAt));
      state.schedules.learn(tick.scheduleId, decided.state, decided.seq);
    } catch (err) {
      if (stop.signal.aborted) throw err;
      deps.log(`owner of partition ${partition}: tick ${tick.tickAt} of ${tick.scheduleId}: ${(err as Error).message}; trying again in ${RETRY_START_MS / 1000} s`);
      state.schedules.retryAt(tick, deps.clock.now() + RETRY_START_MS);
    }
    schedulePump();
  }

  const track = (p: Promise<void>) => {
    const done = p.catch((err: unknown) => {
      if (err instanceof Fenced) return ending('another owner claimed the partition');
      if (!stop.signal.aborted) deps.log(`owner of partition ${partition}: ${(err as Error).message}`);
    }).finally(() => inFlight.delete(done));
    inFlight.add(done);
  };

  /** One send, in a slot of the process's bound on attempts in flight. */
  function run(exec: OwnedExecution): Promise<void> {
    return deps.slots(async () => {
      try {
        // Checked again once a slot is free: the wait may have outlasted the lease.
        if (stop.signal.aborted || !lease.held()) return;
        // One CONSUMER span per send, continuing the trace of whoever planned the execution.
        const { job } = exec;
        const attributes = () => sourceAttributes(job.org_id, job.source, { 'jetcron.execution_id': exec.id, 'jetcron.attempt': job.attempt, 'jetcron.partition': partition });
        await inSpan(`${exec.phase === 'callback' ? 'callback' : 'attempt'} ${job.source.type}`, { kind: SpanKind.CONSUMER, traceparent: exec.traceparent, attributes }, async () => {
          // What a fenced predecessor sent and got, for this very attempt: recorded, not sent again.
          if (exec.adopt) await record([adoptedResult(exec.adopt)]);
          else if (exec.phase === 'callback') await record([await deps.runner.sendCallback(exec.callback!, { mayWrite })]);
          else await attempt(exec);
        });
      } catch (err) {
        if (err instanceof Fenced || stop.signal.aborted) throw err;
        if (err instanceof NotSent) return ending('its lease has lapsed');
        state.notSent(exec);
        deps.log(`owner of partition ${partition}: ${exec.id}: ${(err as Error).message}; trying again in ${RETRY_START_MS / 1000} s`);
        state.later(exec, deps.clock.now() + RETRY_START_MS);
        schedulePump();
      }
    });
  }

  /**
   * A slow attempt's start, made visible. Refused because another owner claimed the
   * partition meanwhile, it is dropped: the request is out, and its result (which the
   * runner returns only once this settles) is what must be kept, recorded late.
   */
  const startRecorded = (e: ExecutionEvent) => record([e]).catch((err: unknown) => {
    if (!(err instanceof Fenced)) throw err;
  });

  /**
   * A lane's head handed in by another partition: its task is that partition's, so whether
   * it was deleted since (a delete read before the hand-off) is asked of the log. A task
   * never changed since its batch has nothing on its own subject.
   */
  async function handedInTaskGone(exec: OwnedExecution): Promise<boolean> {
    const last = await deps.store.last<TaskEvent>(SUBJECTS.task(exec.job.org_id, exec.sourceId));
    return last !== null && evolveTask(null, last.event) === null;
  }

  async function attempt(exec: OwnedExecution): Promise<void> {
    const job = exec.job;
    const hosts = deps.hosts();
    const { host, blockedUntil } = await deps.runner.hostBlock(job);
    const forwardDisabled = state.forwardDisabled(exec);
    // An endpoint's delivery forwards the stored inbound request (gone past 30 days, or with its endpoint).
    const forward = job.inbound && !blockedUntil && !forwardDisabled ? await loadForwardRequest(deps.nats, job.inbound) : null;
    const plan = planAttempt({
      job,
      uncounted: exec.uncounted,
      sourceGone: state.sourceGone(exec) || (exec.handedIn === true && await handedInTaskGone(exec)),
      forwardDisabled,
      requestGone: !!job.inbound && !blockedUntil && !forward && !forwardDisabled,
      forwardMethod: forward?.method ?? null,
      host,
      blockedUntil,
      hostState: host && blockedUntil ? hosts.state(job.org_id, host) : null,
      nowMs: deps.clock.now(),
    });
    if (plan.kind !== 'send') state.notSent(exec);
    switch (plan.kind) {
      case 'record':
      case 'defer':
        return record(plan.events);
      case 'send':
        break;
      default:
        return unreachable(plan);
    }
    const { finished, exchangeMs } = await deps.runner.send(job, { uncounted: plan.uncounted, host, forward, recordStart: startRecorded, mayWrite, onSending: (at) => {
      state.began(exec, at);
      // Its key's rate window may now say when the next start can be.
      schedulePump();
    } });
    await record([finished]);
    if (finished.type === 'AttemptFinished') deps.onAttemptFinished?.(finished.data, exchangeMs);
  }

  /**
   * Subjects whose messages are never this owner's, passed without a decode or a look at
   * each event (every owner of the process reads every message): another partition's
   * claims and result commits, a monitor's events and the monitor partitions' commits.
   */
  const othersOnly = (subject: string) => subject !== own && (subject.startsWith(PARTITION_SUBJECTS) || subject.startsWith(MONITOR_PARTITION_SUBJECTS) || isMonitorSubject(subject));

  const apply = (subject: string, seq: number, events: JetcronEvent[], traceparent: string | undefined) => {
    if (subject === own) {
      // Before the claim: a predecessor's results (`read` passes over this owner's own, past it).
      for (const e of events) if (RESULT_EVENTS.has(e.type)) state.onResult(e as ExecutionEvent);
      return;
    }
    events.forEach((e, i) => {
      if (TASK_EVENT_TYPES.has(e.type)) state.onTaskEvent(e as TaskEvent, seq, i, e.traceparent ?? traceparent);
      else if (e.type === 'InboundEventReceived' || e.type === 'InboundEventReplayed') state.onInboundEvent(e, seq, i, e.traceparent ?? traceparent);
      else if (ENDPOINT_EVENT_TYPES.has(e.type)) {
        state.onEndpointEvent(e as EndpointEvent, seq);
        if (e.type === 'EndpointDeleted') purgeRequests(e as EndpointEvent);
      }
      else if (FLOW_KEY_EVENT_TYPES.has(e.type)) state.onFlowKeyEvent(e as FlowKeyEvent);
      else if (SCHEDULE_EVENT_TYPES.has(e.type)) state.onScheduleEvent(e as ScheduleEvent, seq, i, e.traceparent ?? traceparent);
      else if (e.type === 'ExecutionHandedToKey') state.onHandedToKey(e, seq, i, e.traceparent ?? traceparent);
      // On an execution's own subject: a fenced owner's late result, or the result of a lane
      // head its key's owner sent (a hand-off between partitions).
      else if (RESULT_EVENTS.has(e.type)) state.onResultElsewhere(e as ExecutionEvent);
    });
  };

  const decoded = (item: TapItem, logged = true): JetcronEvent[] => {
    try {
      return (item.decoded ??= decodeEvents(item.data)) as JetcronEvent[];
    } catch (err) {
      // A message no reader can decode is skipped by all of them (a poison message stops no owner).
      if (logged) deps.log(`owner of partition ${partition}: seq ${item.seq}: ${(err as Error).message}`);
      return [];
    }
  };

  /** A read the owner cannot go on without: tried again until it answers (or the owner stops). */
  const readSource = (what: string, read: () => Promise<void>) =>
    readUntilDone(what, read, stop.signal, (m) => deps.log(`owner of partition ${partition}: ${m}`));

  /**
   * The sources of a batch's executions this owner does not know enough of, read before
   * the batch is applied: an endpoint whose events came before its `from` (a takeover
   * reading its deliveries), and a task whose trigger was decided outside its subject on
   * a state older than what this owner has read of deletes (`needsTask`). A failed read
   * is tried again; the owner waits.
   */
  const knowSources = async (batch: TapItem[]) => {
    const endpoints = new Map<string, { orgId: string; endpointId: string }>();
    const tasks = new Map<string, { orgId: string; taskId: string }>();
    for (const item of batch) {
      // A message that does not decode is logged once, by `read`.
      const events = decoded(item, false);
      if (nothingToOwn(item, events)) continue;
      for (const e of events) {
        if ((e.type === 'InboundEventReceived' || e.type === 'InboundEventReplayed') && state.needsEndpoint(e)) {
          endpoints.set(e.data.endpoint.id, { orgId: e.org_id, endpointId: e.data.endpoint.id });
        } else if (e.type === 'TaskTriggered' && state.needsTask(e)) {
          tasks.set(e.data.task.id, { orgId: e.org_id, taskId: e.data.task.id });
        }
      }
    }
    for (const { orgId, endpointId } of endpoints.values()) {
      await readSource(`endpoint ${endpointId}`, async () => {
        const last = await deps.store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, endpointId));
        state.learnEndpoint(orgId, endpointId, last ? evolveEndpoint(null, last.event) : null, last?.seq ?? 0, deps.clock.now());
      });
    }
    // At once: a bulk job's group after a restart may name hundreds of tasks read before this owner's start.
    await Promise.all([...tasks.values()].map(({ orgId, taskId }) => readSource(`task ${taskId}`, async () => {
      const last = await lastTaskEventAt(deps.store, orgId, taskId);
      state.learnTask(taskId, last?.event ?? null, last?.seq ?? 0);
    })));
  };

  /**
   * A deleted endpoint's inbound events go with it (the spec): its owner purges its
   * stored requests from INBOUND (idempotent: a takeover reading the delete again purges
   * nothing more). A failure is logged; the stream's 30-day age drops them anyway.
   */
  function purgeRequests(e: EndpointEvent): void {
    const { org_id: orgId } = e;
    const endpointId = e.data.endpoint.id;
    if (endpointPartition(orgId, endpointId, deps.partitions) !== partition) return;
    track(deps.nats.jsm.streams.purge(STREAMS.inbound.name, { filter: SUBJECTS.inbound(orgId, endpointId) }).then(() => {}));
  }

  /** Applies one message; true when it may have changed what the owner holds (or it has just gone live), so a pump is due. */
  const read = (item: TapItem): boolean => {
    let changed = false;
    // Past the claim, this owner's own subject holds only its own commits, applied when stored.
    if (!othersOnly(item.subject) && !(item.subject === own && item.seq >= log.claimSeq)) {
      const events = decoded(item);
      if (!nothingToOwn(item, events)) {
        apply(item.subject, item.seq, events, item.traceparent);
        changed = true;
      }
    }
    position = item.seq + 1;
    if (!live && item.seq >= log.claimSeq) {
      live = true;
      changed = true;
      deps.log.debug?.('owner live', () => ({ partition, from: log.resumeFrom, claim: log.claimSeq, executions: state.size }));
    }
    return changed;
  };

  try {
    // In batches: every owner of the process reads every message, so a step per item would cost each of them.
    for await (const batch of followEventBatches(deps.nats, { startSeq: log.resumeFrom, signal: stop.signal, log: deps.log, name: `owner.${partition}`, maxMessages: 2_000 })) {
      await knowSources(batch);
      let changed = false;
      for (const item of batch) if (read(item)) changed = true;
      deps.progress?.advanced(position - 1);
      if (changed) schedulePump();
    }
  } finally {
    deps.progress?.stopped();
    held.delete(partition);
    release();
    stop.abort();
    clearTimeout(wake);
    await settle(log, inFlight);
  }
}

/** In-flight attempts finish (their results may still be stored) before the log closes; the next owner re-runs what is left. */
async function settle(log: PartitionLog, inFlight: Set<Promise<void>>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<void>((r) => (timer = setTimeout(r, 10_000)));
  await Promise.race([Promise.all(inFlight), grace]);
  clearTimeout(timer);
  log.close();
}
