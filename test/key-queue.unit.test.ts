/**
 * The key queue's rules, given what the log says and the time: which executions start.
 * A lane is a key with parallelism 1, strict order and retries that keep the slot; a
 * flow-control key bounds parallelism and a sliding-window rate.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { KeyQueue, LANE_LIMITS, type KeyLimits } from '../src/commands/flow-control/key-queue.ts';

const flow = (l: Partial<KeyLimits>): KeyLimits => ({ parallelism: null, rate: null, periodMs: 1000, strict: false, ...l });

describe('a lane (strict, one at a time)', () => {
  test('starts one at a time in due order, the next only after the previous finished', () => {
    const q = new KeyQueue(LANE_LIMITS);
    q.enqueue('a', 0, 1);
    q.enqueue('b', 0, 2);
    q.enqueue('c', 0, 3);
    assert.deepEqual(q.take(10), ['a']);
    assert.deepEqual(q.take(20), []);
    q.finished('a', null, 1);
    assert.deepEqual(q.take(20), ['b']);
    q.finished('b', null, 2);
    assert.deepEqual(q.take(20), ['c']);
    q.finished('c', null, 3);
    assert.ok(q.idle);
  });

  test('never early: an execution due later waits, and one created later but due earlier goes first', () => {
    const q = new KeyQueue(LANE_LIMITS);
    q.enqueue('late', 100, 1);
    q.enqueue('early', 50, 2);
    assert.deepEqual(q.take(49), []);
    assert.equal(q.nextWakeAt(49), 50);
    assert.deepEqual(q.take(50), ['early']);
    q.finished('early', null, 2);
    assert.deepEqual(q.take(99), []);
    assert.deepEqual(q.take(100), ['late']);
  });

  test('same due time: log order (a delayed batch read late keeps its order)', () => {
    const q = new KeyQueue(LANE_LIMITS);
    for (let i = 0; i < 20; i++) q.enqueue(`t${i}`, 3000, i);
    const started: string[] = [];
    for (let i = 0; i < 20; i++) {
      const [id] = q.take(5000 + i);
      started.push(id!);
      q.finished(id!, null, i);
    }
    assert.deepEqual(started, Array.from({ length: 20 }, (_, i) => `t${i}`));
  });

  test('a retry keeps the lane: nothing else starts until it ends', () => {
    const q = new KeyQueue(LANE_LIMITS);
    q.enqueue('a', 0, 1);
    q.enqueue('b', 0, 2);
    assert.deepEqual(q.take(0), ['a']);
    q.finished('a', 500, 1);
    assert.deepEqual(q.take(100), [], 'b must wait for a\'s retry');
    assert.equal(q.nextWakeAt(100), 500);
    assert.deepEqual(q.take(500), ['a']);
    q.finished('a', null, 1);
    assert.deepEqual(q.take(501), ['b']);
  });

  test('a cancelled execution frees the lane; a paused lane keeps everything', () => {
    const q = new KeyQueue(LANE_LIMITS);
    q.enqueue('a', 0, 1);
    q.enqueue('b', 0, 2);
    assert.deepEqual(q.take(0), ['a']);
    q.remove('a');
    q.setPaused(true);
    assert.deepEqual(q.take(1), []);
    assert.equal(q.nextWakeAt(1), null);
    assert.equal(q.waitingCount, 1);
    q.setPaused(false);
    assert.deepEqual(q.take(2), ['b']);
  });
});

describe('a flow-control key', () => {
  test('parallelism N: at most N in flight, and N reached', () => {
    const q = new KeyQueue(flow({ parallelism: 3 }));
    for (let i = 0; i < 10; i++) q.enqueue(`e${i}`, 0, i);
    assert.deepEqual(q.take(0), ['e0', 'e1', 'e2']);
    assert.equal(q.inFlightCount, 3);
    assert.deepEqual(q.take(1), []);
    q.finished('e1', null, 1);
    assert.deepEqual(q.take(2), ['e3']);
    assert.equal(q.nextWakeAt(2), null, 'only a finished attempt can free a slot');
  });

  test('a retry waiting for its time holds no slot, and starts in order of its time', () => {
    const q = new KeyQueue(flow({ parallelism: 1 }));
    q.enqueue('a', 0, 1);
    q.enqueue('b', 0, 2);
    assert.deepEqual(q.take(0), ['a']);
    q.finished('a', 1000, 1);
    assert.deepEqual(q.take(10), ['b'], 'the retry must not hold the slot');
    q.finished('b', null, 2);
    assert.deepEqual(q.take(999), []);
    assert.deepEqual(q.take(1000), ['a']);
  });

  test('rate: never more than `rate` starts in any window of `period` (sliding, no burst at the edge)', () => {
    const q = new KeyQueue(flow({ rate: 5, periodMs: 1000 }));
    for (let i = 0; i < 30; i++) q.enqueue(`e${i}`, 0, i);
    const startTimes: number[] = [];
    // Ask every 7 ms for 4 s; whatever starts, finishes at once.
    for (let now = 0; now < 4000; now += 7) {
      for (const id of q.take(now)) {
        startTimes.push(now);
        q.finished(id, null, 0);
      }
    }
    for (const t of startTimes) {
      const inWindow = startTimes.filter((s) => s > t - 1000 && s <= t).length;
      assert.ok(inWindow <= 5, `${inWindow} starts in the window ending at ${t}`);
    }
    assert.ok(startTimes.length >= 15, `only ${startTimes.length} started in 4 s at 5/s`);
  });

  test('rate blocked: the wake time is when the window opens', () => {
    const q = new KeyQueue(flow({ rate: 2, periodMs: 1000 }));
    for (let i = 0; i < 4; i++) q.enqueue(`e${i}`, 0, i);
    assert.deepEqual(q.take(100), ['e0', 'e1']);
    assert.equal(q.nextWakeAt(150), null, 'taken, not yet sent: the send will say when they started');
    q.began('e0', 100);
    q.began('e1', 100);
    assert.equal(q.nextWakeAt(150), 1100);
    assert.deepEqual(q.take(1099), []);
    assert.deepEqual(q.take(1100), ['e2', 'e3']);
  });

  test('the latest limits apply to what starts next; what is in flight stays', () => {
    const q = new KeyQueue(flow({ parallelism: 4 }));
    for (let i = 0; i < 8; i++) q.enqueue(`e${i}`, 0, i);
    assert.equal(q.take(0).length, 4);
    q.setLimits(flow({ parallelism: 2 }));
    q.finished('e0', null, 0);
    assert.deepEqual(q.take(1), [], '3 still in flight, above the new limit of 2');
    q.finished('e1', null, 1);
    q.finished('e2', null, 2);
    assert.deepEqual(q.take(2), ['e4']);
  });

  test('an execution enqueued twice (a log read again) waits once, at its latest time', () => {
    const q = new KeyQueue(flow({ parallelism: 10 }));
    q.enqueue('a', 100, 1);
    q.enqueue('a', 50, 1);
    assert.equal(q.waitingCount, 1);
    assert.deepEqual(q.take(60), ['a']);
    q.enqueue('a', 0, 1); // in flight: ignored
    assert.deepEqual(q.take(70), []);
  });
});
