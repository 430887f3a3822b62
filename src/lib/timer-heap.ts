import { Heap } from 'heap-js';

interface Node {
  due: number;
  key: string;
  seq: number;
}

const byDue = (a: Node, b: Node): number => a.due - b.due;

/**
 * Due times by key, on heap-js's binary heap: setting a key again or deleting it leaves
 * its old node in the heap, dropped when it reaches the top (lazy deletion; heap-js's
 * own `remove` searches the whole heap). A node is live while its key still maps to its seq.
 */
export class TimerHeap<T> {
  private readonly heap = new Heap<Node>(byDue);
  private readonly live = new Map<string, { seq: number; due: number; value: T }>();

  get size(): number {
    return this.live.size;
  }

  set(key: string, seq: number, due: number, value: T): void {
    this.live.set(key, { seq, due, value });
    this.heap.push({ due, key, seq });
  }

  /** Whether `key` has a live entry (one set and neither deleted nor popped since). */
  has(key: string): boolean {
    return this.live.has(key);
  }

  delete(key: string): void {
    this.live.delete(key);
  }

  /** The due time of `key`'s live entry. */
  dueOf(key: string): number | undefined {
    return this.live.get(key)?.due;
  }

  peekDue(): number | undefined {
    this.dropStale();
    return this.heap.peek()?.due;
  }

  /**
   * Live entries due before `now`, without popping them. Only the part of the heap at or
   * before `now` is walked (a node due later has no earlier child), so it costs the
   * overdue entries (and stale ones among them), not the heap.
   */
  countDue(now: number): number {
    // A key set again with the same seq and due (a message delivered twice) has two nodes.
    const counted = new Set<string>();
    const stack = this.heap.length ? [0] : [];
    for (let i = stack.pop(); i !== undefined; i = stack.pop()) {
      const node = this.heap.get(i);
      if (node.due >= now) continue;
      const entry = this.live.get(node.key);
      if (entry?.seq === node.seq && entry.due === node.due) counted.add(node.key);
      for (const child of Heap.getChildrenIndexOf(i)) if (child < this.heap.length) stack.push(child);
    }
    return counted.size;
  }

  /** Removes and returns every live entry due at or before `now`. */
  popDue(now: number): Array<{ key: string; seq: number; value: T; due: number }> {
    const out: Array<{ key: string; seq: number; value: T; due: number }> = [];
    for (;;) {
      this.dropStale();
      const top = this.heap.peek();
      if (!top || top.due > now) return out;
      this.heap.pop();
      const entry = this.live.get(top.key)!;
      this.live.delete(top.key);
      out.push({ key: top.key, seq: entry.seq, value: entry.value, due: entry.due });
    }
  }

  private dropStale(): void {
    for (let top = this.heap.peek(); top; top = this.heap.peek()) {
      const entry = this.live.get(top.key);
      if (entry && entry.seq === top.seq) return;
      this.heap.pop();
    }
  }
}

/** The longest wait before a heap's alarm looks again. */
const MAX_SLEEP_MS = 3_600_000;

/**
 * One timeout at the heap's earliest due time, set again by each `arm()` (after a change,
 * after firing); `onNext` hears that time (a progress's oldest due). setTimeout fires at
 * once for a delay past 2^31-1 ms (~24.8 days): a far one wakes the heap once an hour
 * instead, which finds nothing due yet.
 */
export function heapAlarm<T>(heap: TimerHeap<T>, signal: AbortSignal, wake: () => void, onNext: (due: number | null) => void = () => {}) {
  let timer: NodeJS.Timeout | undefined;
  /** The due time the timeout is set for (undefined: none set). */
  let armedFor: number | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    armedFor = undefined;
    const due = heap.peekDue();
    onNext(due ?? null);
    if (due === undefined || signal.aborted) return;
    armedFor = due;
    timer = setTimeout(() => {
      armedFor = undefined;
      wake();
    }, Math.min(Math.max(0, due - Date.now()), MAX_SLEEP_MS));
  };
  return {
    arm,
    /** After an entry due at `due` was set: sets the timeout again only if that is earlier than the one set (or none is). */
    earlier(due: number): void {
      if (armedFor === undefined || due < armedFor) arm();
    },
    clear: (): void => clearTimeout(timer),
  };
}
