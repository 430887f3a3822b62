import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRetryAfter } from '../src/commands/execution/retry-after.ts';

const now = Date.parse('2024-03-01T12:00:00Z');

test('delta-seconds', () => {
  assert.equal(parseRetryAfter('120', now), 120_000);
  assert.equal(parseRetryAfter(' 0 ', now), 0);
  assert.equal(parseRetryAfter('-5', now), 0);
  assert.equal(parseRetryAfter('1.5', now), 1500);
});

test('HTTP-date forms', () => {
  assert.equal(parseRetryAfter('Fri, 01 Mar 2024 12:01:30 GMT', now), 90_000);
  assert.equal(parseRetryAfter('Friday, 01-Mar-24 12:00:10 GMT', now), 10_000);
  assert.equal(parseRetryAfter('Fri Mar  1 12:00:05 2024', now), 5_000);
  assert.equal(parseRetryAfter('Fri, 01 Mar 2024 11:00:00 GMT', now), 0, 'past date');
});

test('absent or garbage', () => {
  for (const v of [undefined, '', '   ', 'soon', '10s', '1e3', 'Fri, 99 Foo 2024 xx:yy:zz GMT', '2024-03-01']) {
    assert.equal(parseRetryAfter(v, now), undefined, String(v));
  }
});
