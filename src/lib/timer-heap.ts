/** A min-heap of due times with lazy deletion: an entry is live while its key still maps to its seq. */
export class TimerHeap<T> {
  private heap: Array<{ due: number; key: string; seq: number }> = [];
  private live = new Map<string, { seq: number; due: number; value: T }>();

  get size(): number {
    return this.live.size;
  }

  set(key: string, seq: number, due: number, value: T): void {
    this.live.set(key, { seq, due, value });
    this.heap.push({ due, key, seq });
    this.up(this.heap.length - 1);
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
    return this.heap[0]?.due;
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
      const node = this.heap[i]!;
      if (node.due >= now) continue;
      const entry = this.live.get(node.key);
      if (entry?.seq === node.seq && entry.due === node.due) counted.add(node.key);
      for (const child of [2 * i + 1, 2 * i + 2]) if (child < this.heap.length) stack.push(child);
    }
    return counted.size;
  }

  /** Removes and returns every live entry due at or before `now`. */
  popDue(now: number): Array<{ key: string; seq: number; value: T; due: number }> {
    const out: Array<{ key: string; seq: number; value: T; due: number }> = [];
    for (;;) {
      this.dropStale();
      const top = this.heap[0];
      if (!top || top.due > now) return out;
      this.pop();
      const entry = this.live.get(top.key)!;
      this.live.delete(top.key);
      out.push({ key: top.key, seq: entry.seq, value: entry.value, due: entry.due });
    }
  }

  private dropStale(): void {
    for (;;) {
      const top = this.heap[0];
      if (!top) return;
      const entry = this.live.get(top.key);
      if (entry && entry.seq === top.seq) return;
      this.pop();
    }
  }

  private pop(): void {
    const last = this.heap.pop()!;
    if (this.heap.length) {
      this.heap[0] = last;
      this.down(0);
    }
  }

  private up(i: number): void {
    const h = this.heap;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.due <= h[i]!.due) return;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  private down(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l]!.due < h[m]!.due) m = l;
      if (r < h.length && h[r]!.due < h[m]!.due) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i]!, h[m]!];
      i = m;
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
