import type { Endpoint } from '../endpoint/types.ts';
import { endpointAttemptJob } from '../execution/endpoint-jobs.ts';
import type { AttemptJob } from '../execution/job.ts';
import { LANE_LIMITS, type KeyLimits } from '../flow-control/key-queue.ts';
import { flowLimits } from '../flow-control/rules.ts';
import type { EndpointSnapshot, ForwardPlan, InboundEventEvent } from '../inbound-event/types.ts';
import { forwardDisabled, type EndpointEvent } from '../endpoint/types.ts';
import { PARKED, planned } from '../execution/lifecycle.ts';
import { ExecutionIndex, logOrder, type HeldExecutions, type OwnedExecution, type RetryOf } from './held-executions.ts';
import { endpointPartition } from './partition-of.ts';

/** What an endpoint delivery's jobs are built from: the event that planned it. */
export interface ForwardOrigin {
  endpoint: EndpointSnapshot;
  ref: { event_id: string; seq: number; origin_seq: number };
  plan: ForwardPlan;
  logs: string[] | undefined;
}

/** The owner's key of an endpoint's deliveries: its lane, or its flow-control key, or only its pause. */
export const endpointKey = (orgId: string, endpointId: string) => `${orgId} endpoint ${endpointId}`;

/**
 * What an endpoint's deliveries may do at once: one at a time in order with `use_lane`
 * (a retry holding the lane), else its `flow_control.parallelism`; at most its
 * `flow_control.rate` starts per period either way.
 */
export function endpointLimits(e: Endpoint): KeyLimits {
  const flow = e.flow_control ? flowLimits(e.flow_control) : NO_LIMITS;
  return e.use_lane ? { ...LANE_LIMITS, rate: flow.rate, periodMs: flow.periodMs } : flow;
}

/** An endpoint without a lane or flow control: a key only for its pause. */
const NO_LIMITS: KeyLimits = { parallelism: null, rate: null, periodMs: 1000, strict: false };

/** An inbound event's deliveries, as the owner of their endpoint holds them. */
export function forwardOrigins(event: InboundEventEvent, originSeq: number): ForwardOrigin[] {
  const { event: record, endpoint, executions } = event.data;
  const ref = { event_id: record.id, seq: record.inbound_seq, origin_seq: originSeq };
  return executions.map((plan) => ({ endpoint, ref, plan, logs: record.script_logs }));
}

/** The attempt `attempt` of a delivery, due at `scheduledFor`. */
export const forwardJob = (orgId: string, origin: ForwardOrigin, attempt: number, scheduledFor: string): AttemptJob =>
  endpointAttemptJob(orgId, origin.endpoint, origin.ref, origin.plan, attempt, scheduledFor, origin.logs);

/**
 * The endpoints a partition's owner knows, each as of the latest event of it read (a
 * later sequence wins). One known only from a load of its current state (a takeover
 * reading deliveries planned before) keeps that state against the older events read
 * after it. null: deleted.
 */
export class EndpointStates {
  private readonly states = new Map<string, { endpoint: Endpoint | null; seq: number }>();

  has(endpointId: string): boolean {
    return this.states.has(endpointId);
  }

  /** undefined: not known; null: deleted. */
  get(endpointId: string): Endpoint | null | undefined {
    return this.states.get(endpointId)?.endpoint;
  }

  /** Whether this state is newer than the one known (and is now the one known). */
  learn(endpointId: string, endpoint: Endpoint | null, seq: number): boolean {
    const known = this.states.get(endpointId);
    if (known && known.seq >= seq) return false;
    this.states.set(endpointId, { endpoint, seq });
    return true;
  }
}

/**
 * One partition's endpoints and their live deliveries, as its owner holds them. Each
 * endpoint's deliveries wait in its key (its lane or flow control, and its pause).
 */
export class EndpointDeliveries {
  private readonly states = new EndpointStates();
  private readonly deliveries = new ExecutionIndex();
  private readonly held: HeldExecutions;

  constructor(held: HeldExecutions) {
    this.held = held;
  }

  private mine(orgId: string, endpointId: string): boolean {
    return endpointPartition(orgId, endpointId, this.held.partitions) === this.held.partition;
  }

  /**
   * An inbound event of this partition whose endpoint is not known yet: read before a
   * takeover's `from`, its endpoint's events are not in what the owner reads. The owner
   * loads the endpoint's current state (`learn`) before handing the event on.
   */
  needs(event: InboundEventEvent): boolean {
    const id = event.data.endpoint.id;
    return event.data.executions.length > 0 && !this.states.has(id) && this.mine(event.org_id, id);
  }

  /** An endpoint as of the event at `seq` (null: deleted); an older state than the one known is ignored. */
  learn(orgId: string, endpointId: string, endpoint: Endpoint | null, seq: number, atMs: number): void {
    if (!this.mine(orgId, endpointId)) return;
    if (!this.states.learn(endpointId, endpoint, seq)) return;
    const key = endpointKey(orgId, endpointId);
    if (!endpoint) return this.deleted(endpointId, atMs);
    this.held.queues.setLimits(key, endpointLimits(endpoint));
    this.held.queues.setPaused(key, endpoint.paused);
  }

  /** An endpoint's event from the log. */
  onEndpointEvent(event: EndpointEvent, seq: number): void {
    const endpoint = event.data.endpoint;
    this.learn(event.org_id, endpoint.id, event.type === 'EndpointDeleted' ? null : endpoint, seq, Date.parse(event.at));
  }

  /**
   * An inbound event's deliveries (received or replayed), one per forward URL, due at
   * their time (a debounce window's end). A delivery that `replaces` one of its window
   * still waiting takes its place: this event's request, the window's time.
   */
  onInboundEvent(event: InboundEventEvent, seq: number, index: number, traceparent?: string): void {
    // No delivery planned (collect-only, filtered, rejected): nothing for any owner.
    if (!event.data.executions.length) return;
    const endpointId = event.data.endpoint.id;
    if (!this.mine(event.org_id, endpointId)) return;
    const endpoint = this.states.get(endpointId);
    // Deleted (a replay decided before the delete, committed after it): its deliveries are cancelled unsent.
    if (!endpoint) return this.cancelUnsent(event, seq, index, traceparent);
    // An idle key is dropped with its limits (see PartitionQueues.take): the endpoint as
    // known gives them again, as a task's create does for its key.
    const key = endpointKey(event.org_id, endpointId);
    const { queues } = this.held;
    if (!queues.hasLimits(key)) queues.setLimits(key, endpointLimits(endpoint));
    forwardOrigins(event, seq).forEach((origin, sub) => {
      const id = origin.plan.execution_id;
      const held = this.held.get(id);
      if (held) {
        if (!origin.plan.replaces || held.phase !== 'queued' || held.job.attempt !== 1) return;
        held.forward = origin;
        held.job = forwardJob(event.org_id, origin, 1, origin.plan.scheduled_for);
        queues.reschedule(id, Date.parse(origin.plan.scheduled_for), held.order);
        return;
      }
      this.hold(event, origin, logOrder(seq, index, sub), seq, traceparent, key, Date.parse(origin.plan.scheduled_for));
    });
  }

  /** A delivery held from now on, waiting in `key` for `dueAt`. */
  private hold(event: InboundEventEvent, origin: ForwardOrigin, order: number, seq: number, traceparent: string | undefined, key: string | null, dueAt: number): OwnedExecution {
    const id = origin.plan.execution_id;
    const exec: OwnedExecution = {
      ...planned(forwardJob(event.org_id, origin, 1, origin.plan.scheduled_for)), id, sourceId: event.data.endpoint.id, forward: origin, triggered: false,
      origin: seq, order, adopt: null, traceparent,
    };
    this.deliveries.add(exec.sourceId, id);
    this.held.admit(exec, key, dueAt);
    return exec;
  }

  /** Whether the delivery goes to a forward URL that destination health disabled. */
  forwardDisabled(exec: OwnedExecution): boolean {
    return !!exec.forward && forwardDisabled(this.states.get(exec.sourceId), exec.forward.plan.url);
  }

  /** Whether the delivery's endpoint was deleted. */
  gone(exec: OwnedExecution): boolean {
    return !this.states.get(exec.sourceId);
  }

  /** The next attempt of a delivery; null when its endpoint is gone. */
  retryOf: RetryOf = (exec, attempt, at) =>
    this.states.get(exec.sourceId) ? { job: forwardJob(exec.job.org_id, exec.forward!, attempt, at), enabled: true } : null;

  /** The delivery is over here. */
  forget(exec: OwnedExecution): void {
    this.deliveries.remove(exec.sourceId, exec.id);
  }

  /** An event's deliveries to an endpoint known deleted: each held only to record its cancellation. */
  private cancelUnsent(event: InboundEventEvent, seq: number, index: number, traceparent: string | undefined): void {
    forwardOrigins(event, seq).forEach((origin, sub) => {
      // A debounced event's plan names an execution planned before: that one went with the delete.
      if (origin.plan.replaces || this.held.get(origin.plan.execution_id)) return;
      const exec = this.hold(event, origin, logOrder(seq, index, sub), seq, traceparent, null, PARKED);
      this.held.cancelWaiting(exec, 'endpoint deleted', Date.parse(event.at));
    });
  }

  /** Deleted: its waiting deliveries are cancelled; one being sent ends with its attempt (afterAttempt). */
  private deleted(endpointId: string, atMs: number): void {
    for (const id of this.deliveries.of(endpointId)) {
      const exec = this.held.get(id)!;
      if (exec.phase === 'queued') this.held.cancelWaiting(exec, 'endpoint deleted', atMs);
    }
  }
}
