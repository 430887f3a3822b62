import { Heap } from 'heap-js';
import { TimerHeap } from '../../lib/timer-heap.ts';
import { KeyQueue, type KeyLimits } from './key-queue.ts';

interface FreeEntry {
  executionId: string;
  dueAt: number;
  order: number;
}

/**
 * The second key an execution waits for once its first key takes it: a batch's lane
 * task naming a flow-control key starts when it is its lane's head and its key has a
 * free slot and room in its rate (the contract's "Batches"). The lane holds it from
 * then until its attempt ends, as any lane's head; the key only while it waits there
 * and runs.
 */
export interface Gate {
  key: string;
  /** The key's limits as its task names them, for a key whose queue was dropped while idle. */
  limits: KeyLimits;
}

interface HeldGate extends Gate {
  dueAt: number;
  order: number;
  /** Taken by its first key: waiting in, or running under, this one. */
  passed: boolean;
}

/**
 * Every waiting and running execution of one partition, as its owner holds them: keyed
 * ones (a lane, a flow-control key) in their key's queue, the rest in one due-time heap.
 * Pure: fed what the log says, asked with the time what starts now and when to look
 * again. Keys are the owner's strings (`<org> lane <name>`, `<org> flow <key>`), so two
 * organizations never share one.
 */
export class PartitionQueues {
  private readonly keys = new Map<string, KeyQueue>();
  /** The key of every execution held, null for an unkeyed one. */
  private readonly where = new Map<string, string | null>();
  /** Unkeyed and waiting: due time, then log order. */
  private readonly free = new Heap<FreeEntry>((a, b) => a.dueAt - b.dueAt || a.order - b.order);
  /** Each waiting unkeyed execution's live heap entry; any other entry of it in the heap is stale. */
  private readonly freeWaiting = new Map<string, FreeEntry>();
  /** Keys whose limits were set before any execution named them (the latest create or update names them). */
  private readonly limits = new Map<string, KeyLimits>();
  private readonly paused = new Set<string>();
  /**
   * Keys to look at on the next `take`: changed since the last one, or come to the time
   * they asked to be woken at. A pump looks at these, not at every key held (a thousand
   * keys cost nothing while nothing happens to them).
   */
  private readonly touched = new Set<string>();
  /** Each key's wake time, as its queue last said. */
  private readonly wakes = new TimerHeap<null>();
  /** The executions that wait for a second key (see Gate). */
  private readonly gates = new Map<string, HeldGate>();
  /** The gates a `take` passed executions to, taken from in the same call. */
  private readonly gated = new Set<string>();

  /** The latest create or update naming `key` sets its limits. */
  setLimits(key: string, limits: KeyLimits): void {
    this.limits.set(key, limits);
    this.keys.get(key)?.setLimits(limits);
    this.touched.add(key);
  }

  hasLimits(key: string): boolean {
    return this.limits.has(key);
  }

  setPaused(key: string, paused: boolean): void {
    if (paused) this.paused.add(key);
    else this.paused.delete(key);
    this.keys.get(key)?.setPaused(paused);
    this.touched.add(key);
  }

  /** An execution to run at `dueAt` (or its retry, on a key that does not hold a slot for it); `gate`: the key it waits for next. */
  enqueue(executionId: string, key: string | null, dueAt: number, order: number, gate?: Gate): void {
    this.where.set(executionId, key);
    if (key === null) {
      if (this.gates.size) this.gates.delete(executionId);
      this.pushFree({ executionId, dueAt, order });
      return;
    }
    if (gate) this.gates.set(executionId, { ...gate, dueAt, order, passed: false });
    this.queueOf(key).enqueue(executionId, dueAt, order);
    this.touched.add(key);
  }

  /** An attempt ended: `retryAt` null means the execution is over. */
  finished(executionId: string, retryAt: number | null, order: number): void {
    const key = this.where.get(executionId);
    if (key === undefined) return;
    if (key === null) {
      if (retryAt === null) this.where.delete(executionId);
      else this.enqueue(executionId, null, retryAt, order);
      return;
    }
    const queue = this.keys.get(key)!;
    queue.finished(executionId, retryAt, order);
    this.touched.add(key);
    this.leaveGate(executionId, retryAt, order);
    if (retryAt === null) this.forget(executionId, queue);
  }

  /** A waiting execution is due at another time (see KeyQueue.reschedule); one in flight is not touched. */
  reschedule(executionId: string, dueAt: number, order: number): void {
    const key = this.where.get(executionId);
    if (key === undefined) return;
    if (key !== null) {
      this.touched.add(key);
      const gate = this.gates.get(executionId);
      if (gate) {
        gate.dueAt = dueAt;
        if (gate.passed) this.gateQueue(gate).reschedule(executionId, dueAt);
      }
      return this.keys.get(key)!.reschedule(executionId, dueAt);
    }
    const waiting = this.freeWaiting.get(executionId);
    if (waiting === undefined || waiting.dueAt === dueAt) return;
    this.pushFree({ executionId, dueAt, order });
  }

  /** Running whatever its time and its key's limits say (see KeyQueue.markStarted). */
  markStarted(executionId: string): void {
    const key = this.where.get(executionId);
    if (key === undefined) return;
    if (key === null) this.freeWaiting.delete(executionId);
    else {
      this.keys.get(key)!.markStarted(executionId);
      this.touched.add(key);
      const gate = this.gates.get(executionId);
      if (gate?.passed) this.gateQueue(gate).markStarted(executionId);
    }
  }

  /** Cancelled, or its source deleted: gone from wherever it waits or runs. */
  remove(executionId: string): void {
    const key = this.where.get(executionId);
    if (key === undefined) return;
    if (key === null) {
      this.freeWaiting.delete(executionId);
      this.where.delete(executionId);
      return;
    }
    const queue = this.keys.get(key)!;
    queue.remove(executionId);
    this.touched.add(key);
    const gate = this.gates.get(executionId);
    if (gate?.passed) this.gateQueue(gate).remove(executionId);
    this.forget(executionId, queue);
  }

  has(executionId: string): boolean {
    return this.where.has(executionId);
  }

  /** Taken and not finished: for a keyed execution its key says; an unkeyed one is in flight once it left the heap. */
  inFlight(executionId: string): boolean {
    const key = this.where.get(executionId);
    if (key === undefined) return false;
    if (key === null) return !this.freeWaiting.has(executionId);
    return this.keys.get(key)?.isInFlight(executionId) ?? false;
  }

  /** The attempt taken is being sent (see KeyQueue.began). */
  began(executionId: string, at: number): void {
    this.keyed(executionId)?.began(executionId, at);
  }

  /** The attempt taken was not sent (see KeyQueue.notSent). */
  notSent(executionId: string): void {
    this.keyed(executionId)?.notSent(executionId);
  }

  /** A recorded attempt's start (see KeyQueue.recordedStart). */
  recordedStart(executionId: string, at: number): void {
    this.keyed(executionId)?.recordedStart(executionId, at);
  }

  /** Every key starting with `prefix` that holds something or is paused, with what it holds. */
  keysWithPrefix(prefix: string): Array<{ key: string; waiting: number; in_flight: number; paused: boolean }> {
    const names = new Set<string>();
    for (const key of this.keys.keys()) if (key.startsWith(prefix)) names.add(key);
    for (const key of this.paused) if (key.startsWith(prefix)) names.add(key);
    return [...names].map((key) => ({ key, ...this.keyStats(key) }));
  }

  /** The queue that counts the execution's starts (its gate's, when it has one); the key is looked at on the next take (its rate window changes). */
  private keyed(executionId: string): KeyQueue | undefined {
    const key = this.where.get(executionId);
    if (!key) return undefined;
    this.touched.add(key);
    const gate = this.gates.get(executionId);
    if (gate) return this.gateQueue(gate);
    return this.keys.get(key);
  }

  /** What starts at `now`: unkeyed ones due, in order, then each key's that changed or came to its wake time. */
  take(now: number): string[] {
    const out: string[] = [];
    for (let top = this.free.peek(); top && top.dueAt <= now; top = this.free.peek()) {
      this.free.pop();
      // A stale heap node: the execution was removed, or enqueued again at another time.
      if (this.freeWaiting.get(top.executionId) !== top) continue;
      this.freeWaiting.delete(top.executionId);
      out.push(top.executionId);
    }
    for (const { key } of this.wakes.popDue(now)) this.touched.add(key);
    for (const key of this.touched) this.takeFrom(key, now, out);
    // The gates the loop's heads passed to: what they let start now, starts now.
    for (const key of this.gated) this.takeFrom(key, now, out);
    this.gated.clear();
    this.touched.clear();
    return out;
  }

  /** What one key starts at `now` into `out`; an execution with a gate moves on to its gate's key (named in `gated`). */
  private takeFrom(key: string, now: number, out: string[]): void {
    const queue = this.keys.get(key);
    if (!queue) return;
    for (const id of queue.take(now)) {
      const gate = this.gates.size ? this.gates.get(id) : undefined;
      if (!gate || gate.passed) out.push(id);
      else {
        gate.passed = true;
        this.gateQueue(gate).enqueue(id, gate.dueAt, gate.order);
        this.touched.add(gate.key);
        this.gated.add(gate.key);
      }
    }
    // An idle key's queue is dropped once its rate window is empty too, and its limits
    // with it (the next execution's task names them again; a pause stays), so a key
    // costs memory only while in use and never forgets a start.
    if (queue.forgettable(now)) {
      this.keys.delete(key);
      this.limits.delete(key);
      this.wakes.delete(key);
      return;
    }
    // Idle with starts still in its window: looked at again when the window may be empty.
    const wake = queue.nextWakeAt(now) ?? (queue.idle ? now + queue.periodMs : null);
    if (wake === null) this.wakes.delete(key);
    else if (this.wakes.dueOf(key) !== wake) this.wakes.set(key, wake, wake, null);
  }

  /** The gate's key's queue, its limits given again when it was dropped while idle. */
  private gateQueue(gate: Gate): KeyQueue {
    if (!this.limits.has(gate.key)) this.setLimits(gate.key, gate.limits);
    return this.queueOf(gate.key);
  }

  /**
   * An attempt ended under its gate: the gate's slot is free (its rate window keeps the
   * start), and a retry waits for its first key again, then for the gate.
   */
  private leaveGate(executionId: string, retryAt: number | null, order: number): void {
    const gate = this.gates.size ? this.gates.get(executionId) : undefined;
    if (!gate) return;
    if (gate.passed) {
      const queue = this.gateQueue(gate);
      queue.finished(executionId, null, order);
      queue.remove(executionId);
      this.touched.add(gate.key);
      gate.passed = false;
    }
    if (retryAt !== null) gate.dueAt = retryAt;
  }

  /** When `take` may next return something on its own (null: only an event can change that). */
  nextWakeAt(now: number): number | null {
    // A key changed since the last take: take again now.
    if (this.touched.size) return now;
    let wake: number | null = null;
    while (this.free.length && this.freeWaiting.get(this.free.peek()!.executionId) !== this.free.peek()) this.free.pop();
    if (this.free.length) wake = this.free.peek()!.dueAt;
    const keyed = this.wakes.peekDue();
    if (keyed !== undefined) wake = wake === null ? keyed : Math.min(wake, keyed);
    return wake;
  }

  /** For `GET /flow-control`: what each key holds now. */
  keyStats(key: string): { waiting: number; in_flight: number; paused: boolean } {
    const queue = this.keys.get(key);
    return { waiting: queue?.waitingCount ?? 0, in_flight: queue?.inFlightCount ?? 0, paused: this.paused.has(key) };
  }

  private pushFree(entry: FreeEntry): void {
    this.freeWaiting.set(entry.executionId, entry);
    this.free.push(entry);
  }

  private queueOf(key: string): KeyQueue {
    let queue = this.keys.get(key);
    if (!queue) {
      const limits = this.limits.get(key);
      if (!limits) throw new Error(`key ${key} has no limits: set them before its first execution`);
      queue = new KeyQueue(limits);
      queue.setPaused(this.paused.has(key));
      this.keys.set(key, queue);
    }
    return queue;
  }

  private forget(executionId: string, queue: KeyQueue): void {
    if (queue.has(executionId)) return;
    this.where.delete(executionId);
    this.gates.delete(executionId);
  }
}
