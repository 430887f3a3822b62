import type { AttemptJob } from '../execution/job.ts';
import type { ExecutionState } from '../execution/lifecycle.ts';
import type { LateResult } from '../execution/late-results.ts';
import type { PartitionQueues } from '../flow-control/partition-queues.ts';
import type { ForwardOrigin } from './owned-endpoints.ts';

/** A live execution as its owner holds it: its state in the execution's one state machine (`lifecycle.ts`), and where it came from. */
export interface OwnedExecution extends ExecutionState {
  id: string;
  /** Its task's, schedule's or endpoint's id. */
  sourceId: string;
  /** An endpoint's delivery: the event that planned it (its jobs are built from it). null: a task's or a schedule's execution. */
  forward: ForwardOrigin | null;
  /** Planned by a trigger: runs even while its source is disabled (its retries do not). */
  triggered: boolean;
  /** EVENTS sequence of the event that planned it: a takeover reads the log from the lowest of these. */
  origin: number;
  /** The log order: the tie-break between executions due at once. */
  order: number;
  /** A fenced owner's late result for the attempt (or callback delivery) it waits for: recorded as this owner's instead of sending it (`late-results.ts`). */
  adopt: LateResult | null;
  /** The W3C trace context of the event that planned it: its attempts continue that trace. */
  traceparent: string | undefined;
  /**
   * Another partition's lane's head, handed to this partition's key: sent here once, its
   * result recorded on the execution's subject for its lane's owner, and over here then.
   */
  handedIn?: true;
}

/**
 * What a kind of source (schedules, endpoints) asks of the partition's executions: the
 * one set of live executions, their queues, and the cancellations to record. Each kind
 * keeps its own sources and its index of their executions.
 */
export interface HeldExecutions {
  readonly partition: number;
  readonly partitions: number;
  readonly queues: PartitionQueues;
  get(executionId: string): OwnedExecution | undefined;
  /** A newly planned execution, waiting in `key` (null: none) for `dueAt`. */
  admit(exec: OwnedExecution, key: string | null, dueAt: number): void;
  /** One waiting for its time will not run (its source is gone): it waits no more, and its `ExecutionCancelled` for `reason` is to be recorded. */
  cancelWaiting(exec: OwnedExecution, reason: string, atMs: number): void;
}

/** The next attempt as an execution's source says it now (null: the source is gone). */
export type RetryOf = (exec: OwnedExecution, attempt: number, at: string, pushCallback: string | null) => { job: AttemptJob; enabled: boolean } | null;

/** Events of one stored message are told apart by their index; a commit holds far fewer than this. */
const PER_MESSAGE = 65_536;
/** The executions one event plans (an inbound event's deliveries: one per forward URL, at most 10). */
const PER_EVENT = 16;
/** The log order of the `sub`-th execution planned by the event at (`seq`, `index`). */
export const logOrder = (seq: number, index: number, sub = 0) => (seq * PER_MESSAGE + index) * PER_EVENT + sub;

/** A source's live executions, by source id. */
export class ExecutionIndex {
  private readonly bySource = new Map<string, Set<string>>();

  add(sourceId: string, executionId: string): void {
    let set = this.bySource.get(sourceId);
    if (!set) this.bySource.set(sourceId, (set = new Set()));
    set.add(executionId);
  }

  remove(sourceId: string, executionId: string): void {
    const set = this.bySource.get(sourceId);
    set?.delete(executionId);
    if (set && set.size === 0) this.bySource.delete(sourceId);
  }

  has(sourceId: string): boolean {
    return this.bySource.has(sourceId);
  }

  of(sourceId: string): Iterable<string> {
    return this.bySource.get(sourceId) ?? [];
  }
}
