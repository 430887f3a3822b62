import type { Endpoint } from '../endpoint/types.ts';
import { endpointAttemptJob } from '../execution/endpoint-jobs.ts';
import type { AttemptJob } from '../execution/job.ts';
import { LANE_LIMITS, type KeyLimits } from '../flow-control/key-queue.ts';
import { flowLimits } from '../flow-control/rules.ts';
import type { EndpointSnapshot, ForwardPlan, InboundEventEvent } from '../inbound-event/types.ts';

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
