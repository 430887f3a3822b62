import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TimerHeap } from '../src/lib/timer-heap.ts';

// countDue walks only the overdue part of the heap; it must agree with counting every
// live entry, whatever replaced, deleted, popped or twice-set entries the heap holds.

test('countDue counts the live entries due before now, as a full count does', () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const heap = new TimerHeap<null>();
  const live = new Map<string, { seq: number; due: number }>();
  let seq = 0;
  for (let step = 0; step < 5000; step++) {
    const key = `t${Math.floor(random() * 300)}`;
    const r = random();
    if (r < 0.6) {
      const due = Math.floor(random() * 1000);
      heap.set(key, ++seq, due, null);
      live.set(key, { seq, due });
    } else if (r < 0.75) {
      // The same message delivered twice: same key, seq and due.
      const e = live.get(key);
      if (e) heap.set(key, e.seq, e.due, null);
    } else if (r < 0.9) {
      heap.delete(key);
      live.delete(key);
    } else {
      const now = Math.floor(random() * 1000);
      for (const e of heap.popDue(now)) live.delete(e.key);
    }
    const now = Math.floor(random() * 1200);
    const expected = [...live.values()].filter((e) => e.due < now).length;
    assert.equal(heap.countDue(now), expected, `step ${step}, now ${now}`);
    assert.equal(heap.size, live.size);
  }
});
