import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchLimit } from '../src/projections/batch-limit.ts';

/** The batch sizes a range of `messages` messages of `perMessage` events each is cut into, as the preparing thread cuts it. */
function batchesOf(messages: number, perMessage: number, max: number, first: number): number[] {
  const sizes: number[] = [];
  let size = 0;
  for (let seq = 1; seq <= messages; seq++) {
    size += perMessage;
    const limit = batchLimit({ max, first, shipped: sizes.length, eventsRead: seq * perMessage, messagesRead: seq, messagesLeft: messages - seq });
    if (size >= limit) {
      sizes.push(size);
      size = 0;
    }
  }
  if (size) sizes.push(size);
  return sizes;
}

test('batches grow from the first size to the largest, then shrink towards the range end', () => {
  const sizes = batchesOf(31_000, 8, 40_000, 5_000);
  assert.equal(sizes.reduce((a, b) => a + b, 0), 248_000, 'every event in a batch');
  assert.deepEqual(sizes.slice(0, 4), [5_000, 10_000, 20_000, 40_000]);
  assert.ok(sizes.every((s) => s <= 40_000));
  assert.ok(sizes.at(-1)! <= 5_000, `the last batch is small: ${sizes.join(', ')}`);
  const peak = sizes.indexOf(40_000);
  const tail = sizes.slice(sizes.lastIndexOf(40_000) + 1);
  assert.ok(peak > 0 && tail.length >= 2, `several smaller batches at the end: ${sizes.join(', ')}`);
  for (let i = 1; i < tail.length; i++) assert.ok(tail[i]! <= tail[i - 1]!, `the end's batches shrink: ${tail.join(', ')}`);
});

test('a largest batch below the first size is every batch', () => {
  const sizes = batchesOf(20, 1, 3, 5_000);
  assert.deepEqual(sizes, [3, 3, 3, 3, 3, 3, 2]);
});

test('a range smaller than the first batch is one batch', () => {
  assert.deepEqual(batchesOf(100, 8, 40_000, 5_000), [800]);
});

test('a message larger than a batch still ships alone', () => {
  assert.deepEqual(batchesOf(3, 9_000, 5_000, 5_000), [9_000, 9_000, 9_000]);
});
