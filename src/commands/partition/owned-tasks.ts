import { Heap } from 'heap-js';
import { unreachable } from '../../lib/unreachable.ts';
import type { Endpoint, EndpointEvent } from '../endpoint/types.ts';
import { executionCancelled } from '../execution/ending.ts';
import { adoptsLate, isLate, type LateResult } from '../execution/late-results.ts';
import { cancelling, handBack, handed, notStarted, onRecorded, PARKED, planned, started } from '../execution/lifecycle.ts';
import { taskAttemptJob } from '../execution/task-jobs.ts';
import type { AttemptJob } from '../execution/job.ts';
import type { ExecutionEvent } from '../execution/types.ts';
import { LANE_LIMITS } from '../flow-control/key-queue.ts';
import { PartitionQueues, type Gate } from '../flow-control/partition-queues.ts';
import { flowLimits } from '../flow-control/rules.ts';
import type { FlowControl, FlowKeyEvent } from '../flow-control/types.ts';
import type { InboundEventEvent } from '../inbound-event/types.ts';
import type { ScheduleEvent } from '../schedule/types.ts';
import type { PlannedExecution, Task, TaskEvent } from '../task/types.ts';
import { ExecutionIndex, logOrder, type HeldExecutions, type OwnedExecution } from './held-executions.ts';
import { EndpointDeliveries, endpointKey } from './owned-endpoints.ts';
import { ScheduleRuns, type DueTick, type ScheduleStates } from './owned-schedules.ts';
import { flowKeyPartition, taskPartition } from './partition-of.ts';
import { TaskFates } from './task-fates.ts';
import type { HandoffEvent } from './types.ts';

export type { OwnedExecution };

/** The owner's name of a task's key: two organizations never share one. */
const laneKey = (orgId: string, lane: string) => `${orgId} lane ${lane}`;
const flowKey = (orgId: string, key: string) => `${orgId} flow ${key}`;
/** A flow key's organization and name; null for a lane's key. An organization's id holds no space, a lane's name may hold " flow ". */
function flowKeyName(ownerKey: string): { org_id: string; key: string } | null {
  const at = ownerKey.indexOf(' ');
  return ownerKey.startsWith('flow ', at + 1) ? { org_id: ownerKey.slice(0, at), key: ownerKey.slice(at + 6) } : null;
}
const keyOf = (task: Task): string | null =>
  task.lane ? laneKey(task.org_id, task.lane) : task.flow_control ? flowKey(task.org_id, task.flow_control.key) : null;
/**
 * A batch's lane task naming a key (the contract's "Batches"): its lane's head starts
 * only when its key has a free slot and room in its rate too. A key of the lane's own
 * partition is a gate in its queues; a key of another partition is its owner's, and the
 * head is handed to it (`ExecutionHandedToKey`).
 */
const laneKeyOf = (task: Task): FlowControl | null => (task.lane && task.flow_control ? task.flow_control : null);

/** A task object's partition, by the count it was computed for (decoded events are shared by a process's owners). */
const partitionOfTask = new WeakMap<Task, { partitions: number; partition: number }>();

/** What one key holds now. */
export interface KeyLoad {
  key: string;
  waiting: number;
  in_flight: number;
  paused: boolean;
}

export { PARKED };

/** What one turn of the owner's loop carries out (`OwnedTasks.step`). */
export interface OwnerStep {
  /** `ExecutionCancelled` events to record (one commit). */
  cancels: ExecutionEvent[];
  /** Attempts (or callback deliveries) to send now. */
  starts: OwnedExecution[];
  /** Schedule ticks to record. */
  ticks: DueTick[];
  /** Lane heads to append as handed to their key's partition. */
  handoffs: HandoffEvent[];
  /** When the next turn is due on its own; null when only an event can change what starts. */
  wakeAt: number | null;
}

interface OwnedTask {
  task: Task;
  /** The stream sequence of the state held: a trigger decided on an older one (`source_seq`) does not replace it. */
  seq: number;
  gone: boolean;
  executions: Set<string>;
}

/** Why a task's executions are cancelled when it goes. */
const goneReason = (type: 'TaskDeleted' | 'TaskCancelled') => (type === 'TaskDeleted' ? 'task deleted' : 'task cancelled');

/**
 * Every live execution of one partition, as its owner holds them: built from the log
 * alone (source events in stream order, then the owner's own results), so a takeover
 * that reads the same log holds the same state as the owner before it. Pure: the owner
 * feeds it what it reads and what it records, and asks it what a turn does (`step`).
 * It holds the executions, their queues (a key per lane, flow-control key and endpoint),
 * their origins and the tasks with their lanes, keys and hand-offs; a schedule's runs
 * are `ScheduleRuns`' and an endpoint's deliveries `EndpointDeliveries'`. The rules are
 * the execution's (`lifecycle.ts`, `decide.ts`) and the keys' (`key-queue.ts`).
 */
export class OwnedTasks {
  private readonly tasks = new Map<string, OwnedTask>();
  private readonly executions = new Map<string, OwnedExecution>();
  private readonly queues = new PartitionQueues();
  private readonly cancelling = new Set<string>();
  /** Origins of the live executions, lowest first (entries of ended ones are dropped lazily). */
  private readonly origins = new Heap<number>((a, b) => a - b);
  private readonly originCounts = new Map<number, number>();
  /** Lane heads to hand to their key's partition, to be appended (see laneKeyOf). */
  private readonly handoffs: HandoffEvent[] = [];
  /** How many times each lane head was handed over, as the log says (the next hand-off's id). */
  private readonly handoffCounts = new Map<string, number>();
  /** The executions handed in, by their task: a delete cancels those still waiting. */
  private readonly handedInBySource = new ExecutionIndex();
  /** The partition's tasks known deleted or cancelled, for triggers decided outside their task's subject. */
  private readonly fates: TaskFates;

  readonly partition: number;
  readonly partitions: number;
  /** What the kinds of source below ask of this partition's executions. */
  private readonly held: HeldExecutions;
  private readonly endpoints: EndpointDeliveries;
  private readonly scheduleRuns: ScheduleRuns;
  /** The partition's schedules and their next ticks. */
  readonly schedules: ScheduleStates;

  /** `readsFrom`: the first EVENTS sequence the owner reads (what it knows of deletes starts there). */
  constructor(partition: number, partitions: number, readsFrom = 0) {
    this.partition = partition;
    this.partitions = partitions;
    this.fates = new TaskFates(readsFrom);
    this.held = {
      partition, partitions, queues: this.queues,
      get: (id) => this.executions.get(id),
      admit: (exec, key, dueAt) => {
        this.track(exec);
        this.queues.enqueue(exec.id, key, dueAt, exec.order);
      },
      cancelWaiting: (exec, reason, atMs) => {
        this.queues.remove(exec.id);
        const { job } = exec;
        this.markCancelling(exec, executionCancelled(job.org_id, { execution_id: exec.id, source: job.source, reason, lane: job.lane }, atMs));
      },
    };
    this.endpoints = new EndpointDeliveries(this.held);
    this.scheduleRuns = new ScheduleRuns(this.held);
    this.schedules = this.scheduleRuns.states;
  }

  /** Whether this owner is sending the execution now (its attempt or its callback). */
  sending(executionId: string): boolean {
    const phase = this.executions.get(executionId)?.phase;
    return phase === 'running' || (phase === 'callback' && this.queues.inFlight(executionId));
  }

  /** Live executions held. */
  get size(): number {
    return this.executions.size;
  }

  get(executionId: string): OwnedExecution | undefined {
    return this.executions.get(executionId);
  }

  /** Whether the execution's task was deleted or cancelled (it is not sent again). */
  sourceGone(exec: OwnedExecution): boolean {
    if (exec.forward) return this.endpoints.gone(exec);
    if (exec.job.source.type === 'schedule') return this.scheduleRuns.gone(exec);
    // Its task is its lane's owner's; a delete cancels it while it waits (handedInGone).
    if (exec.handedIn) return false;
    return this.tasks.get(exec.sourceId)?.gone ?? true;
  }

  /**
   * An endpoint delivery to a forward URL that destination health disabled, as the
   * endpoint is known now: its attempt is cancelled when its turn comes, never sent
   * (`planAttempt`), so the endpoint's lane goes on to its other URLs' deliveries.
   */
  forwardDisabled(exec: OwnedExecution): boolean {
    return this.endpoints.forwardDisabled(exec);
  }

  /** An inbound event of this partition whose endpoint is not known yet: the owner loads it first (`learnEndpoint`). */
  needsEndpoint(event: InboundEventEvent): boolean {
    return this.endpoints.needs(event);
  }

  /** An endpoint as of the event at `seq` (null: deleted); an older state than the one known is ignored. */
  learnEndpoint(orgId: string, endpointId: string, endpoint: Endpoint | null, seq: number, atMs: number): void {
    this.endpoints.learn(orgId, endpointId, endpoint, seq, atMs);
  }

  /** An endpoint's event from the log. */
  onEndpointEvent(event: EndpointEvent, seq: number): void {
    this.endpoints.onEndpointEvent(event, seq);
  }

  /** An inbound event's deliveries (received or replayed), one per forward URL (`EndpointDeliveries`). */
  onInboundEvent(event: InboundEventEvent, seq: number, index: number, traceparent?: string): void {
    this.endpoints.onInboundEvent(event, seq, index, traceparent);
  }

  /**
   * The lowest EVENTS sequence a takeover must read from to hold every live execution
   * (the event that planned it, and every later change of its task); null when none is live.
   */
  lowestOrigin(): number | null {
    for (let top = this.origins.peek(); top !== undefined; top = this.origins.peek()) {
      if (this.originCounts.has(top)) return top;
      this.origins.pop();
    }
    return null;
  }

  /**
   * A trigger of this partition decided outside its task's subject on a state older
   * than what this owner has read (a takeover): the owner reads the task's last event
   * first (`learnTask`), so a delete it did not read still wins over the trigger.
   */
  needsTask(event: TaskEvent): boolean {
    if (event.type !== 'TaskTriggered' || event.data.source_seq === undefined) return false;
    const task = event.data.task;
    return this.partitionOf(task) === this.partition && this.fates.fate(task.id, event.data.source_seq) === undefined;
  }

  /** A task's last event as read now (null: none, the task never existed); see `needsTask`. */
  learnTask(taskId: string, last: TaskEvent | null, seq: number): void {
    const type = last?.type;
    this.fates.learned(taskId, !last ? 'task deleted' : type === 'TaskDeleted' || type === 'TaskCancelled' ? goneReason(type) : null, seq);
  }

  /** A task event from the log (any partition's: those of other partitions are ignored). */
  onTaskEvent(event: TaskEvent, seq: number, index: number, traceparent?: string): void {
    const task = event.data.task;
    const owned = this.tasks.get(task.id);
    switch (event.type) {
      case 'TaskCreated':
      case 'TaskTriggered': {
        // A new execution belongs to the partition of the task as it is now; one already held
        // stays with its owner when an update moves the task's lane or key elsewhere. A
        // task's lane or key is in the same partition, so its limits are no one else's.
        if (this.partitionOf(task) !== this.partition) {
          // A batch's lane task naming a key sets the key's limits in the key's own partition too.
          if (task.lane && task.flow_control && event.type === 'TaskCreated') this.flowKeyLimits(task, false);
          return;
        }
        const triggered = event.type === 'TaskTriggered';
        // Decided outside the task's subject: on the task's state at `source_seq`.
        const stateSeq = triggered ? event.data.source_seq ?? seq : seq;
        this.keyLimits(task, triggered);
        const exec = this.plan(task, stateSeq, event.data.execution, seq, logOrder(seq, index), triggered, traceparent);
        // Deleted after the state the trigger was decided on: its run is cancelled, never sent.
        const gone = exec && triggered && event.data.source_seq !== undefined ? this.fates.fate(task.id, event.data.source_seq) : null;
        if (exec && gone) {
          this.tasks.get(task.id)!.gone = true;
          this.held.cancelWaiting(exec, gone, Date.parse(event.at));
        }
        return;
      }
      case 'TaskUpdated':
        this.keyLimits(task, false);
        if (owned) this.changed(owned, task, seq);
        return;
      case 'TaskDeleted':
      case 'TaskCancelled': {
        const reason = goneReason(event.type);
        if (this.partitionOf(task) === this.partition) this.fates.gone(task.id, reason, seq);
        if (owned) this.gone(owned, reason, Date.parse(event.at));
        else if (this.handedInBySource.has(task.id)) this.handedInGone(task.id, reason, Date.parse(event.at));
        return;
      }
    }
  }

  /** A key paused or resumed (any partition's: those of other partitions are ignored). */
  onFlowKeyEvent(event: FlowKeyEvent): void {
    if (flowKeyPartition(event.org_id, event.data.key, this.partitions) !== this.partition) return;
    this.queues.setPaused(flowKey(event.org_id, event.data.key), event.type === 'FlowControlPaused');
  }

  /** A schedule's last event, read at a takeover before the log: its state, and nothing planned. */
  knowSchedule(event: ScheduleEvent, seq: number): void {
    this.scheduleRuns.know(event, seq);
  }

  /** A schedule's event (any partition's: those of other partitions are ignored; `ScheduleRuns`). */
  onScheduleEvent(event: ScheduleEvent, seq: number, index = 0, traceparent?: string): void {
    this.scheduleRuns.onEvent(event, seq, index, traceparent);
  }

  /** The attempt taken for `exec` is being sent now: its key's rate window counts it from `at`. */
  began(exec: OwnedExecution, at: number): void {
    this.queues.began(exec.id, at);
  }

  /** The attempt taken for `exec` was not sent (a host block deferred it, a plan said it was over). */
  notSent(exec: OwnedExecution): void {
    this.queues.notSent(exec.id);
  }

  /** The flow-control keys of `orgId` this partition holds or holds paused: what waits and what runs. */
  flowKeys(orgId: string): KeyLoad[] {
    return this.loadsUnder(flowKey(orgId, ''));
  }

  /** The endpoints of `orgId` whose deliveries this partition holds, or that are paused (`key`: the endpoint id). */
  endpointLoads(orgId: string): KeyLoad[] {
    return this.loadsUnder(endpointKey(orgId, ''));
  }

  /** Every organization's flow-control keys held here (`jetcron status`, the metrics' gauges). */
  allFlowKeys(): Array<KeyLoad & { org_id: string }> {
    const out: Array<KeyLoad & { org_id: string }> = [];
    for (const k of this.queues.keysWithPrefix('')) {
      const named = flowKeyName(k.key);
      if (named) out.push({ ...k, ...named });
    }
    return out;
  }

  private loadsUnder(prefix: string): KeyLoad[] {
    return this.queues.keysWithPrefix(prefix).map((k) => ({ ...k, key: k.key.slice(prefix.length) }));
  }

  /**
   * A result this partition's owner recorded: applied once its commit is stored, or
   * read back from the log by the owner that takes over. The same event gives the same
   * state either way.
   */
  onResult(event: ExecutionEvent): void {
    const exec = this.executions.get(event.data.execution_id);
    if (!exec) return;
    exec.adopt = null;
    if (exec.handedIn) return this.handedInResult(exec, event);
    // A handed head's attempt is its key's owner's: its result counts while handed, for that attempt only.
    if (event.type === 'AttemptStarted' || event.type === 'AttemptFinished' || event.type === 'AttemptDeferred') {
      if (exec.phase === 'handed' ? event.data.attempt !== exec.job.attempt : this.keyElsewhere(exec)) return;
    }
    // Read back at a takeover, a result may belong to an execution this state has only seen waiting.
    if (event.type !== 'AttemptStarted' && event.type !== 'ExecutionCancelled') this.queues.markStarted(exec.id);
    if (event.type === 'AttemptFinished') this.queues.recordedStart(exec.id, Date.parse(event.data.started_at));
    // What follows is the execution's to decide (lifecycle.ts); this carries it out in the queues.
    const step = onRecorded(exec, event, (attempt, at, pushCallback) => this.retryOf(exec, attempt, at, pushCallback));
    switch (step.kind) {
      case 'none':
        return;
      case 'wait':
        return this.queues.finished(exec.id, step.dueAt, exec.order);
      case 'cancel':
        this.queues.finished(exec.id, null, exec.order);
        this.cancelling.add(exec.id);
        return;
      case 'callback':
        this.queues.finished(exec.id, null, exec.order);
        return this.queues.enqueue(exec.id, null, step.dueAt, exec.order);
      case 'over':
        if (step.release) this.queues.finished(exec.id, null, exec.order);
        return this.drop(exec);
      default:
        return unreachable(step);
    }
  }

  /**
   * A result read on an execution's own subject, not this partition's log. A fenced
   * owner's late result (`isLate`) changes nothing here: it is adopted, recorded as this
   * owner's own when the execution comes up, if the execution still waits for that
   * attempt; else it is history. Any other result there (the key owner's of a handed-over
   * lane head, or an older log's) applies as any result, unless this owner is sending the
   * execution (its own result will).
   */
  onResultElsewhere(event: ExecutionEvent): void {
    const exec = this.executions.get(event.data.execution_id);
    if (!exec || this.sending(exec.id)) return;
    if (!isLate(event)) return this.onResult(event);
    const late = event as LateResult;
    if (adoptsLate(late, { phase: exec.phase, attempt: exec.job.attempt, callbackAttempt: exec.callback?.attempt ?? null })) exec.adopt = late;
  }

  /**
   * One turn of the owner's loop, decided here so the loop only carries it out: the
   * cancellations to record, what starts now (`take`), the schedule ticks due, the lane
   * heads to hand over, and when to look again (null: only an event can change that).
   */
  step(now: number): OwnerStep {
    return { cancels: this.takeCancels(), starts: this.take(now), ticks: this.schedules.dueTicks(now), handoffs: this.takeHandoffs(), wakeAt: this.nextWakeAt(now) };
  }

  /** What starts at `now`: each is `running` (its attempt, or its callback delivery) until its result is recorded. */
  take(now: number): OwnedExecution[] {
    const out: OwnedExecution[] = [];
    for (const id of this.queues.take(now)) {
      const exec = this.executions.get(id);
      if (!exec) continue;
      if (exec.phase === 'queued') {
        const flow = this.keyElsewhere(exec);
        if (flow) {
          this.handOff(exec, flow, now);
          continue;
        }
        started(exec);
      }
      out.push(exec);
    }
    return out;
  }

  /** The lane heads handed over since the last call, to append (each on its execution's subject). */
  takeHandoffs(): HandoffEvent[] {
    return this.handoffs.splice(0);
  }

  /** A hand-off that could not be appended: its lane holds it, and hands it over again at `at`. */
  handOffFailed(executionId: string, at: number): void {
    const exec = this.executions.get(executionId);
    if (!exec || !handBack(exec)) return;
    this.queues.finished(exec.id, at, exec.order);
  }

  /** Whether the execution was handed in by another partition's lane (its results go to its own subject). */
  handedIn(executionId: string): boolean {
    return this.executions.get(executionId)?.handedIn === true;
  }

  /**
   * A lane's head handed to a key (read from the log by every owner). The key's owner
   * holds it under its key until it has a slot and room in the rate, then sends it once;
   * the lane's owner, reading back its own hand-off (or its predecessor's, at a
   * takeover), holds the head as handed.
   */
  onHandedToKey(event: HandoffEvent, seq: number, index: number, traceparent?: string): void {
    const { execution_id: id, key, job } = event.data;
    const held = this.executions.get(id);
    if (held && !held.handedIn) {
      this.handoffCounts.set(id, Math.max(this.handoffCounts.get(id) ?? 0, event.data.handoff));
      if (held.phase === 'queued' && held.job.attempt === job.attempt) {
        this.queues.markStarted(id);
        handed(held);
      }
      return;
    }
    if (held || flowKeyPartition(event.org_id, key, this.partitions) !== this.partition) return;
    const fkey = flowKey(event.org_id, key);
    if (!this.queues.hasLimits(fkey)) this.queues.setLimits(fkey, flowLimits(event.data.limits));
    const exec: OwnedExecution = {
      ...planned(job, event.data.uncounted_attempts), id, sourceId: job.source.id, forward: null, triggered: true,
      origin: seq, order: logOrder(seq, index), adopt: null, traceparent, handedIn: true,
    };
    this.track(exec);
    this.handedInBySource.add(exec.sourceId, id);
    this.queues.enqueue(id, fkey, Date.parse(job.scheduled_for), exec.order);
  }

  /** The cancellations to record now; each is handed out once (its record, read back, ends it). */
  takeCancels(): ExecutionEvent[] {
    const out: ExecutionEvent[] = [];
    for (const id of this.cancelling) out.push(this.executions.get(id)!.cancel!);
    this.cancelling.clear();
    return out;
  }

  /** A start that could not be sent (its organization unreadable, a store refusing): it is tried again at `at`. */
  later(exec: OwnedExecution, at: number): void {
    notStarted(exec);
    this.queues.finished(exec.id, at, exec.order);
  }

  /** Executions waiting for their time (a delay, a retry): `jetcron_timers_pending`. */
  waitingForTime(now: number): number {
    let n = 0;
    for (const exec of this.executions.values()) if (exec.phase === 'queued' && Date.parse(exec.job.scheduled_for) > now) n++;
    return n;
  }

  /** When `take` may next return something on its own; null when only an event can change that. */
  nextWakeAt(now: number): number | null {
    const queued = this.queues.nextWakeAt(now);
    const wake = Math.min(queued ?? Infinity, this.schedules.nextDueAt() ?? Infinity);
    return wake === Infinity || wake >= PARKED ? null : wake;
  }

  /** The execution planned (undefined: held already); `stateSeq` is the sequence of `task`'s state. */
  private plan(task: Task, stateSeq: number, execution: PlannedExecution, origin: number, order: number, triggered: boolean, traceparent: string | undefined): OwnedExecution | undefined {
    if (this.executions.has(execution.id)) return undefined;
    let owned = this.tasks.get(task.id);
    if (!owned) this.tasks.set(task.id, (owned = { task, seq: stateSeq, gone: false, executions: new Set() }));
    // A trigger decided on an older state (a bulk job's) runs that state; the task held stays the newer one.
    if (stateSeq >= owned.seq) {
      owned.task = task;
      owned.seq = stateSeq;
    }
    const exec: OwnedExecution = {
      ...planned(taskAttemptJob(task, execution, 1)), id: execution.id, sourceId: task.id, forward: null, triggered,
      origin, order, adopt: null, traceparent,
    };
    this.track(exec);
    owned.executions.add(exec.id);
    this.queues.enqueue(exec.id, keyOf(task), this.dueOf(exec, task), order, this.gateOf(task));
    return exec;
  }

  /** A lane task's key of this partition: its lane's head waits in it too (PartitionQueues' gate). */
  private gateOf(task: Task): Gate | undefined {
    const flow = laneKeyOf(task);
    if (!flow || flowKeyPartition(task.org_id, flow.key, this.partitions) !== this.partition) return undefined;
    return { key: flowKey(task.org_id, flow.key), limits: flowLimits(flow) };
  }

  private track(exec: OwnedExecution): void {
    this.executions.set(exec.id, exec);
    this.originCounts.set(exec.origin, (this.originCounts.get(exec.origin) ?? 0) + 1);
    this.origins.push(exec.origin);
  }

  /** The next attempt as the execution's source says it now; null when the source is gone. */
  private retryOf(exec: OwnedExecution, attempt: number, at: string, pushCallback: string | null): { job: AttemptJob; enabled: boolean } | null {
    if (exec.forward) return this.endpoints.retryOf(exec, attempt, at, pushCallback);
    if (exec.job.source.type === 'schedule') return this.scheduleRuns.retryOf(exec, attempt, at, pushCallback);
    const owned = this.tasks.get(exec.sourceId);
    if (!owned || owned.gone) return null;
    return { job: taskAttemptJob(owned.task, { id: exec.id, scheduled_for: at, callback_url: pushCallback }, attempt), enabled: owned.task.enabled };
  }

  /**
   * The latest create or update naming a key sets its limits (a key of another
   * partition is not this owner's). A trigger only gives a key its first limits: it
   * plans a run of the task as it is, and sets nothing.
   */
  /** Every owner of a process looks at every create: the first to ask hashes the task, the others read that. */
  private partitionOf(task: Task): number {
    let p = partitionOfTask.get(task);
    if (p === undefined || p.partitions !== this.partitions) partitionOfTask.set(task, (p = { partitions: this.partitions, partition: taskPartition(task, this.partitions) }));
    return p.partition;
  }

  private keyLimits(task: Task, triggered: boolean): void {
    const key = keyOf(task);
    if (!key) return;
    if (task.lane) {
      if (!this.queues.hasLimits(key)) this.queues.setLimits(key, LANE_LIMITS);
      if (!task.flow_control) return;
    }
    this.flowKeyLimits(task, triggered);
  }

  /** A key's limits, set in the key's own partition (a batch's lane task naming it may be planned in another: its lane's). */
  private flowKeyLimits(task: Task, triggered: boolean): void {
    const flow = task.flow_control!;
    const key = flowKey(task.org_id, flow.key);
    if (triggered && this.queues.hasLimits(key)) return;
    if (flowKeyPartition(task.org_id, flow.key, this.partitions) === this.partition) this.queues.setLimits(key, flowLimits(flow));
  }

  /** The task changed: its waiting executions take the new definition, time and enabled state. */
  private changed(owned: OwnedTask, task: Task, seq: number): void {
    owned.task = task;
    owned.seq = seq;
    for (const id of owned.executions) {
      const exec = this.executions.get(id)!;
      if (exec.phase !== 'queued') continue;
      const planned = exec.job.attempt === 1 && task.pending_execution?.id === exec.id
        ? task.pending_execution
        : { id: exec.id, scheduled_for: exec.job.scheduled_for, callback_url: exec.job.push_callback_url };
      exec.job = taskAttemptJob(task, planned, exec.job.attempt);
      this.queues.reschedule(exec.id, this.dueOf(exec, task), exec.order);
    }
  }

  /** A lane task's key when another partition holds it: its lane's head is handed there. */
  private keyElsewhere(exec: OwnedExecution): FlowControl | null {
    if (exec.forward || exec.handedIn) return null;
    const task = this.tasks.get(exec.sourceId)?.task;
    const flow = task ? laneKeyOf(task) : null;
    return flow && flowKeyPartition(exec.job.org_id, flow.key, this.partitions) !== this.partition ? flow : null;
  }

  /** The lane's head goes to its key's owner: the lane holds it (in flight) until its result is read. */
  private handOff(exec: OwnedExecution, flow: FlowControl, now: number): void {
    handed(exec);
    const handoff = (this.handoffCounts.get(exec.id) ?? 0) + 1;
    this.handoffCounts.set(exec.id, handoff);
    const { key, ...limits } = flow;
    this.handoffs.push({
      type: 'ExecutionHandedToKey',
      id: `${exec.id}.handed.${handoff}`,
      at: new Date(now).toISOString(),
      org_id: exec.job.org_id,
      data: { execution_id: exec.id, key, limits, job: exec.job, uncounted_attempts: exec.uncounted, handoff },
    });
  }

  /** A handed-in execution's own result: its attempt is over here (the key's slot is free, the rate keeps its start). */
  private handedInResult(exec: OwnedExecution, event: ExecutionEvent): void {
    if (event.type === 'AttemptStarted') return;
    this.queues.markStarted(exec.id);
    if (event.type === 'AttemptFinished') this.queues.recordedStart(exec.id, Date.parse(event.data.started_at));
    this.queues.finished(exec.id, null, exec.order);
    this.drop(exec);
  }

  /** A handed-in execution's task deleted or cancelled: one still waiting for its key is cancelled (its lane's owner reads it). */
  private handedInGone(taskId: string, reason: string, atMs: number): void {
    for (const id of this.handedInBySource.of(taskId)) {
      const exec = this.executions.get(id)!;
      if (exec.phase === 'queued') this.held.cancelWaiting(exec, reason, atMs);
    }
  }

  /** Deleted or cancelled: what waits is cancelled; what runs ends with its attempt (afterAttempt). */
  private gone(owned: OwnedTask, reason: string, atMs: number): void {
    owned.gone = true;
    for (const id of owned.executions) {
      const exec = this.executions.get(id)!;
      if (exec.phase === 'queued') this.held.cancelWaiting(exec, reason, atMs);
    }
  }

  private markCancelling(exec: OwnedExecution, event: ExecutionEvent): void {
    cancelling(exec, event);
    this.cancelling.add(exec.id);
  }

  private dueOf(exec: OwnedExecution, task: Task): number {
    return exec.triggered || task.enabled ? Date.parse(exec.job.scheduled_for) : PARKED;
  }

  private drop(exec: OwnedExecution): void {
    this.executions.delete(exec.id);
    this.queues.remove(exec.id);
    this.cancelling.delete(exec.id);
    this.handoffCounts.delete(exec.id);
    if (exec.handedIn) {
      this.handedInBySource.remove(exec.sourceId, exec.id);
    } else if (exec.forward) {
      this.endpoints.forget(exec);
    } else if (exec.job.source.type === 'schedule') {
      this.scheduleRuns.forget(exec);
    } else {
      const owned = this.tasks.get(exec.sourceId);
      owned?.executions.delete(exec.id);
      if (owned && owned.executions.size === 0) this.tasks.delete(exec.sourceId);
    }
    const n = this.originCounts.get(exec.origin)! - 1;
    if (n) this.originCounts.set(exec.origin, n);
    else this.originCounts.delete(exec.origin);
  }
}
