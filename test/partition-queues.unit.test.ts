/** A partition's executions: keyed ones through their key's rules, the rest by due time. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LANE_LIMITS, type KeyLimits } from '../src/commands/flow-control/key-queue.ts';
import { PartitionQueues } from '../src/commands/flow-control/partition-queues.ts';

const flow = (l: Partial<KeyLimits>): KeyLimits => ({ parallelism: null, rate: null, periodMs: 1000, strict: false, ...l });

test('unkeyed executions start when due, in due then log order, never early; a retry comes back at its time', () => {
  const q = new PartitionQueues();
  q.enqueue('b', null, 100, 2);
  q.enqueue('a', null, 100, 1);
  q.enqueue('c', null, 50, 3);
  assert.deepEqual(q.take(49), []);
  assert.equal(q.nextWakeAt(49), 50);
  assert.deepEqual(q.take(100), ['c', 'a', 'b']);
  q.finished('a', 300, 1);
  q.finished('b', null, 2);
  assert.equal(q.has('b'), false);
  assert.equal(q.nextWakeAt(100), 300);
  assert.deepEqual(q.take(300), ['a']);
});

test('a removed execution never starts; one enqueued again waits for its latest time only', () => {
  const q = new PartitionQueues();
  q.enqueue('x', null, 10, 1);
  q.remove('x');
  q.enqueue('y', null, 10, 2);
  q.enqueue('y', null, 500, 2);
  assert.deepEqual(q.take(100), []);
  assert.equal(q.nextWakeAt(100), 500);
  assert.deepEqual(q.take(500), ['y']);
});

test('two organizations\' keys of the same name do not share limits', () => {
  const q = new PartitionQueues();
  q.setLimits('org_a flow api', flow({ parallelism: 1 }));
  q.setLimits('org_b flow api', flow({ parallelism: 1 }));
  for (const org of ['org_a', 'org_b']) for (let i = 0; i < 3; i++) q.enqueue(`${org}-${i}`, `${org} flow api`, 0, i);
  assert.deepEqual(q.take(0).sort(), ['org_a-0', 'org_b-0']);
  assert.deepEqual(q.keyStats('org_a flow api'), { waiting: 2, in_flight: 1, paused: false });
});

test('a lane and the unkeyed work beside it: the lane one at a time, the rest as due', () => {
  const q = new PartitionQueues();
  q.setLimits('org_a lane l', LANE_LIMITS);
  q.enqueue('l1', 'org_a lane l', 0, 1);
  q.enqueue('l2', 'org_a lane l', 0, 2);
  q.enqueue('f1', null, 0, 3);
  assert.deepEqual(q.take(0), ['f1', 'l1']);
  q.finished('l1', null, 1);
  assert.deepEqual(q.take(1), ['l2']);
});

test('a key that went idle keeps its rate window: no burst past the rate when work comes back', () => {
  const q = new PartitionQueues();
  q.setLimits('org_a flow r', flow({ rate: 2, periodMs: 1000 }));
  q.enqueue('a', 'org_a flow r', 0, 1);
  q.enqueue('b', 'org_a flow r', 0, 2);
  assert.deepEqual(q.take(0), ['a', 'b']);
  q.finished('a', null, 1);
  q.finished('b', null, 2);
  assert.deepEqual(q.take(10), []);
  q.enqueue('c', 'org_a flow r', 20, 3);
  assert.deepEqual(q.take(20), [], 'two starts already in this window');
  assert.deepEqual(q.take(1000), ['c']);
});

test('a paused key starts nothing and keeps what waits; its pause outlives its queue', () => {
  const q = new PartitionQueues();
  q.setLimits('org_a flow p', flow({ parallelism: 5 }));
  q.setPaused('org_a flow p', true);
  q.enqueue('a', 'org_a flow p', 0, 1);
  assert.deepEqual(q.take(0), []);
  assert.deepEqual(q.keyStats('org_a flow p'), { waiting: 1, in_flight: 0, paused: true });
  q.setPaused('org_a flow p', false);
  assert.deepEqual(q.take(1), ['a']);
});

test('an execution of a key with no limits set is a programming error, said at once', () => {
  const q = new PartitionQueues();
  assert.throws(() => q.enqueue('a', 'org_a flow none', 0, 1), /no limits/);
});

test('an unkeyed execution moved away and back to the same time starts once', () => {
  const q = new PartitionQueues();
  q.enqueue('e1', null, 100, 1);
  q.reschedule('e1', 5_000, 1);
  q.reschedule('e1', 100, 1);
  assert.deepEqual(q.take(200), ['e1']);
  assert.deepEqual(q.take(10_000), []);
});

test('only keys that changed or came to their time are looked at; an idle key with starts in its window is forgotten once they leave it', () => {
  const q = new PartitionQueues();
  q.setLimits('org_a flow r', flow({ rate: 1, periodMs: 1000 }));
  q.enqueue('a', 'org_a flow r', 0, 1);
  q.enqueue('b', 'org_a flow r', 0, 2);
  assert.deepEqual(q.take(0), ['a']);
  assert.equal(q.nextWakeAt(0), null, 'a is taken, not yet sent: its send says when');
  q.began('a', 0);
  assert.equal(q.nextWakeAt(0), 0, 'the send changed the key: look again');
  assert.deepEqual(q.take(0), []);
  assert.equal(q.nextWakeAt(1), 1000, 'the window opens at 1000');
  q.finished('a', null, 1);
  assert.deepEqual(q.take(999), []);
  assert.deepEqual(q.take(1000), ['b']);
  q.began('b', 1000);
  q.finished('b', null, 2);
  q.take(1001);
  assert.equal(q.keysWithPrefix('').length, 1, 'idle, b still in its window');
  const wake = q.nextWakeAt(1001);
  assert.ok(wake !== null && wake >= 2000, `woken again when the window may be empty (${wake})`);
  q.take(wake!);
  assert.deepEqual(q.keysWithPrefix(''), [], 'forgotten');
});
