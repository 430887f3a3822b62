import { Heap } from 'heap-js';

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

/**
 * One start inside the rate window. Counted from when the owner took it; once the
 * attempt is sent, from when it was (later, never earlier); once its result is read,
 * from the start that result records. Until it is sent it never leaves the window, so
 * however long a send waits (a slot, a sign), the starts as recorded keep the rate.
 */
interface Start {
  executionId: string;
  at: number;
  /** Taken, not yet sent: stays in the window whatever its time. */
  pending: boolean;
  /** Its time is the one its recorded result gives. */
  recorded: boolean;
}

/** Due time, then log order. */
const byDue = (a: Entry, b: Entry): number => a.dueAt - b.dueAt || a.order - b.order;

/**
 * The executions of one key and which of them may start: a pure state machine, fed by
 * what the log says (an execution to run, a result, a cancel) and asked, with the
 * time, what starts now. Starts happen in order of due time (ties: log order), never
 * before their time, within the key's parallelism and its sliding-window rate; a
 * paused key starts nothing and keeps everything.
 */
export class KeyQueue {
  private readonly waiting = new Map<string, Entry>();
  private readonly heap = new Heap<Entry>(byDue);
  /** In flight: started and not finished, or (strict) waiting for a retry while holding the slot. */
  private readonly inFlight = new Set<string>();
  /** Strict keys only: the in-flight executions waiting for their retry, and when it is. */
  private readonly holding = new Map<string, number>();
  /** The starts within the rate window (keys with a rate only), oldest first. */
  private starts: Start[] = [];
  /** Each execution's latest start in the window. */
  private readonly startOf = new Map<string, Start>();
  private paused = false;

  private limits: KeyLimits;

  constructor(limits: KeyLimits) {
    this.limits = limits;
  }

  /** The latest create or update naming the key sets its limits; what is in flight stays. */
  setLimits(limits: KeyLimits): void {
    this.limits = limits;
  }

  /** The rate window's length. */
  get periodMs(): number {
    return this.limits.periodMs;
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

  isInFlight(executionId: string): boolean {
    return this.inFlight.has(executionId);
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
    // A result with no word of its send: it started when it was taken.
    const start = this.startOf.get(executionId);
    if (start) start.pending = false;
    if (!this.inFlight.has(executionId)) return;
    if (retryAt !== null && this.limits.strict) {
      this.holding.set(executionId, retryAt);
      return;
    }
    this.inFlight.delete(executionId);
    if (retryAt !== null) this.enqueue(executionId, retryAt, order);
  }

  /** The attempt taken for this execution is being sent now (`at`: the time its request starts). */
  began(executionId: string, at: number): void {
    const start = this.startOf.get(executionId);
    if (!start?.pending) return;
    start.pending = false;
    start.at = Math.max(start.at, at);
  }

  /** The attempt taken was not sent (its host blocked, the owner stopping): it was no start. */
  notSent(executionId: string): void {
    const start = this.startOf.get(executionId);
    if (!start?.pending) return;
    this.startOf.delete(executionId);
    this.starts = this.starts.filter((s) => s !== start);
  }

  /**
   * A recorded attempt started at `at`: the window counts it from then. Read back by an
   * owner that takes over, it is a start the window did not know of; so a takeover
   * keeps the rate of the owner before it.
   */
  recordedStart(executionId: string, at: number): void {
    if (this.limits.rate === null) return;
    const start = this.startOf.get(executionId);
    if (start && !start.recorded) {
      Object.assign(start, { at, pending: false, recorded: true });
      return;
    }
    this.pushStart({ executionId, at, pending: false, recorded: true });
  }

  /** The executions to start at `now`, in order; each is in flight from here on. */
  take(now: number): string[] {
    if (this.paused) return [];
    const out: string[] = [];
    for (const [executionId, retryAt] of this.holding) {
      if (retryAt > now || !this.rateAllows(now)) continue;
      this.holding.delete(executionId);
      this.countStart(executionId, now);
      out.push(executionId);
    }
    while (this.hasSlot() && this.rateAllows(now)) {
      const head = this.head();
      if (!head || head.dueAt > now) break;
      this.heap.pop();
      this.waiting.delete(head.executionId);
      this.inFlight.add(head.executionId);
      this.countStart(head.executionId, now);
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
    if (wake !== null && this.limits.rate !== null && !this.rateAllows(now)) {
      // The oldest start leaves the window then; one still being sent leaves only once sent (a finished send pumps again).
      const oldest = this.starts[0]!;
      wake = oldest.pending ? null : Math.max(wake, oldest.at + this.limits.periodMs);
    }
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

  private countStart(executionId: string, now: number): void {
    if (this.limits.rate !== null) this.pushStart({ executionId, at: now, pending: true, recorded: false });
  }

  private pushStart(start: Start): void {
    this.starts.push(start);
    this.startOf.set(start.executionId, start);
  }

  private rateAllows(now: number): boolean {
    if (this.limits.rate === null) return true;
    const from = now - this.limits.periodMs;
    let drop = 0;
    // From the oldest on; a start not yet sent, or one whose send came late, holds back those after it (counted a little longer, never less).
    while (drop < this.starts.length && !this.starts[drop]!.pending && this.starts[drop]!.at <= from) drop++;
    if (drop) {
      for (let i = 0; i < drop; i++) {
        const gone = this.starts[i]!;
        if (this.startOf.get(gone.executionId) === gone) this.startOf.delete(gone.executionId);
      }
      this.starts = this.starts.slice(drop);
    }
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
