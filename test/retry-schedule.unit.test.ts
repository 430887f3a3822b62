import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryLandsAfter, taskRetryDelayMs } from '../src/commands/execution/retry-schedule.ts';

test('task retry n waits (n+1)²/2 minutes', () => {
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => taskRetryDelayMs(n) / 60_000), [2, 4.5, 8, 12.5, 18]);
});

test('cron-retry rule: a retry at or after the next tick is skipped, one before it runs', () => {
  const tick = Date.parse('2024-03-01T12:05:00Z');
  assert.equal(retryLandsAfter(tick, tick - 1), false);
  assert.equal(retryLandsAfter(tick, tick), true, 'same instant: the tick takes over');
  assert.equal(retryLandsAfter(tick, tick + 1), true);
  // A 5-minute schedule whose run at 12:00 failed: retry 1 (2 min) runs, retry 3 (8 min) is skipped.
  const ranAt = Date.parse('2024-03-01T12:00:00Z');
  assert.equal(retryLandsAfter(tick, ranAt + taskRetryDelayMs(1)), false);
  assert.equal(retryLandsAfter(tick, ranAt + taskRetryDelayMs(3)), true);
});

test('cron-retry rule takes ISO strings and Dates; no next tick or a bad time never skips', () => {
  assert.equal(retryLandsAfter('2024-03-01T12:05:00Z', '2024-03-01T12:06:00.000Z'), true);
  assert.equal(retryLandsAfter(new Date('2024-03-01T12:05:00Z'), new Date('2024-03-01T12:04:00Z')), false);
  assert.equal(retryLandsAfter(null, Date.now()), false);
  assert.equal(retryLandsAfter(undefined, Date.now()), false);
  assert.equal(retryLandsAfter('not a time', Date.now()), false);
});
