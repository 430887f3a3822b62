import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoTime } from '../src/lib/iso-time.ts';

test('isoTime writes what toISOString writes: every millisecond of seconds in and out of order, fractions, the edges', () => {
  const at = [0, 1, 999, 1000, 1_764_150_000_000, 1_764_150_000_999, 1_764_150_001_000, 951_782_400_000, 253_402_300_799_999, 253_402_300_800_000, -1, -62_198_755_200_000, 1_764_150_000_123.7];
  for (let i = 0; i < 5_000; i++) at.push(1_764_150_000_000 + ((i * 7919) % 3_000_000), 1_764_150_000_000 - i * 37);
  for (const ms of at) assert.equal(isoTime(ms), new Date(ms).toISOString(), String(ms));
  assert.throws(() => isoTime(Number.NaN), RangeError);
});
