import { MinHeap } from '../../lib/min-heap.ts';

/**
 * What one key allows. A lane is the strictest key: parallelism 1, strict order, and an
 * execution waiting for its retry keeps the lane. A flow-control key (the contract's
 * "Flow control") bounds how many run at once and how many start per window; a retry
 * waiting for its time holds no slot there.
 */
export interface KeyLimits {
  /** At most this many executions in flight at once; null: no bound. */
  parallelism: number | null;
  /** At most this many attempts started in any window of `periodMs` (sliding); null: no bound. */
  rate: number | null;
  periodMs: number;
  /** A lane: one at a time (parallelism is 1), and a retry keeps its slot while it waits. */
  strict: boolean;
}

export const LANE_LIMITS: KeyLimits = { parallelism: 1, rate: null, periodMs: 1000, strict: true };

interface Entry {
  executionId: string;
  dueAt: number;
  /** Log position: the tie-break between executions due at the same time. */
  order: number;
}

const before = (a: Entry, b: Entry) => a.dueAt < b.dueAt || (a.dueAt === b.dueAt && a.order < b.order);

/**
 * The executions of one key and which of them may start: a pure state machine, fed by
 * what the log says (an execution to run, a result, a cancel) and asked, with the
 * time, what starts now. Starts happen in order of due time (ties: log order), never
 * before their time, within the key's parallelism and its sliding-window rate; a
 * paused key starts nothing and keeps everything.
 */
export class KeyQueue {
  private readonly waiting = new Map<string, Entry>();
  private readonly heap = new MinHeap<Entry>(before);
  /** In flight: started and not finished, or (strict) waiting for a retry while holding the slot. */
  private readonly inFlight = new Set<string>();
  /** Strict keys only: the in-flight executions waiting for their retry, and when it is. */
  private readonly holding = new Map<string, number>();
  /** Start times within the rate window, oldest first. */
  private starts: number[] = [];
  private paused = false;

  constructor(private limits: KeyLimits) {}

  /** The latest create or update naming the key sets its limits; what is in flight stays. */
  setLimits(limits: KeyLimits): void {
    this.limits = limits;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  setPaused(paused: boolean): void {
    this.paused = paused;
  }

  get waitingCount(): number {
    return this.waiting.size;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Whether the key holds nothing: no waiting execution and none in flight. */
  get idle(): boolean {
    return this.waiting.size === 0 && this.inFlight.size === 0;
  }

  /** Idle, and no start inside the rate window: nothing would change if it were made anew. */
  forgettable(now: number): boolean {
    return this.idle && (this.limits.rate === null || this.rateAllowsAll(now));
  }

  has(executionId: string): boolean {
    return this.waiting.has(executionId) || this.inFlight.has(executionId);
  }

  /** An execution (or its retry, on a key that is not strict) waits for its time and a slot. */
  enqueue(executionId: string, dueAt: number, order: number): void {
    if (this.inFlight.has(executionId)) return;
    const entry = { executionId, dueAt, order };
    this.waiting.set(executionId, entry);
    this.heap.push(entry);
  }

  /**
   * A waiting execution (or a strict key's held retry) is due at another time: its
   * source was changed, paused or resumed. One in flight is not touched.
   */
  reschedule(executionId: string, dueAt: number): void {
    const held = this.holding.get(executionId);
    if (held !== undefined) this.holding.set(executionId, dueAt);
    else {
      const entry = this.waiting.get(executionId);
      if (entry && entry.dueAt !== dueAt) this.enqueue(executionId, dueAt, entry.order);
    }
  }

  /**
   * The execution is running whatever its time and the key's limits say: a result read
   * back from the log (a takeover replaying what the previous owner did) is applied to
   * an execution that this queue has only seen waiting.
   */
  markStarted(executionId: string): void {
    if (this.holding.delete(executionId)) return;
    if (!this.waiting.delete(executionId)) return;
    this.inFlight.add(executionId);
  }

  /** The execution is over without a result of its own (cancelled, its source deleted). */
  remove(executionId: string): void {
    this.waiting.delete(executionId);
    this.inFlight.delete(executionId);
    this.holding.delete(executionId);
  }

  /**
   * An attempt ended. `retryAt` null: the execution is over and its slot is free. A
   * retry on a strict key keeps the slot and restarts at `retryAt`; elsewhere it frees
   * the slot and waits like any execution due then.
   */
  finished(executionId: string, retryAt: number | null, order: number): void {
    if (!this.inFlight.has(executionId)) return;
    if (retryAt !== null && this.limits.strict) {
      this.holding.set(executionId, retryAt);
      return;
    }
    this.inFlight.delete(executionId);
    if (retryAt !== null) this.enqueue(executionId, retryAt, order);
  }

  /** The executions to start at `now`, in order; each is in flight from here on. */
  take(now: number): string[] {
    if (this.paused) return [];
    const out: string[] = [];
    for (const [executionId, retryAt] of this.holding) {
      if (retryAt > now || !this.rateAllows(now)) continue;
      this.holding.delete(executionId);
      this.starts.push(now);
      out.push(executionId);
    }
    while (this.hasSlot() && this.rateAllows(now)) {
      const head = this.head();
      if (!head || head.dueAt > now) break;
      this.heap.pop();
      this.waiting.delete(head.executionId);
      this.inFlight.add(head.executionId);
      this.starts.push(now);
      out.push(head.executionId);
    }
    return out;
  }

  /**
   * When `take` could next return something without anything else happening: a due
   * time, a held retry's time, or the rate window opening; null when only a finished
   * attempt (or a resume) can free the way.
   */
  nextWakeAt(now: number): number | null {
    if (this.paused) return null;
    let wake: number | null = null;
    const consider = (t: number) => (wake = wake === null ? t : Math.min(wake, t));
    for (const retryAt of this.holding.values()) consider(retryAt);
    const head = this.hasSlot() ? this.head() : undefined;
    if (head) consider(head.dueAt);
    if (wake !== null && this.limits.rate !== null && !this.rateAllows(now)) wake = Math.max(wake, this.starts[0]! + this.limits.periodMs);
    return wake;
  }

  private rateAllowsAll(now: number): boolean {
    this.rateAllows(now);
    return this.starts.length === 0;
  }

  private hasSlot(): boolean {
    const limit = this.limits.strict ? 1 : this.limits.parallelism;
    return limit === null || this.inFlight.size < limit;
  }

  private rateAllows(now: number): boolean {
    if (this.limits.rate === null) return true;
    const from = now - this.limits.periodMs;
    let drop = 0;
    while (drop < this.starts.length && this.starts[drop]! <= from) drop++;
    if (drop) this.starts = this.starts.slice(drop);
    return this.starts.length < this.limits.rate;
  }

  /** The first live waiting entry (entries replaced or removed are dropped on the way). */
  private head(): Entry | undefined {
    for (let top = this.heap.peek(); top; top = this.heap.peek()) {
      if (this.waiting.get(top.executionId) === top) return top;
      this.heap.pop();
    }
    return undefined;
  }
}
