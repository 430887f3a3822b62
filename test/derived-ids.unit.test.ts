import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { derivedId, derivedIdPair, ID_PATTERN } from '../src/lib/ids.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** The derived id as its definition reads: the time in 10 base-32 digits, the index's last two, then 12 of the digest's. */
function byDefinition(prefix: string, ms: number, seed: string, index: number, from = 0): string {
  let time = '';
  for (let rest = ms; time.length < 10 || rest > 0; rest = Math.floor(rest / 32)) time = ALPHABET[rest % 32] + time;
  const digest = createHash('sha256').update(`${seed}:${index}`).digest();
  const tail = [...digest.subarray(from, from + 12)].map((b) => ALPHABET[b % 32]).join('');
  return `${prefix}_${time}${ALPHABET[Math.floor(index / 32) % 32]}${ALPHABET[index % 32]}${tail}`;
}

test('a derived id is its definition, whatever the time, seed and index, and the same inputs give it again', () => {
  const cases: Array<[ms: number, seed: string, index: number]> = [];
  for (let i = 0; i < 3_000; i++) cases.push([1_796_604_605_033 + (i % 5) * 7_919, `rjb_${i % 11}:exe`, i * 37]);
  cases.push([0, '', 0], [Date.parse('2026-12-07T00:00:00Z'), 'seed with é and \u{1F680}', 1_048_575]);
  for (const [ms, seed, index] of cases) {
    const id = derivedId('exe', ms, seed, index);
    assert.equal(id, byDefinition('exe', ms, seed, index));
    assert.equal(derivedId('exe', ms, seed, index), id);
    assert.match(id, ID_PATTERN);
  }
});

test('derived ids sort by time, then by index within a time', () => {
  const ids = [0, 1, 31, 32, 33, 1_000].map((i) => derivedId('evt', 1_796_604_605_033, 'job', i));
  assert.deepEqual([...ids].sort(), ids);
  assert.ok(derivedId('evt', 1_796_604_605_034, 'job', 0) > derivedId('evt', 1_796_604_605_033, 'job', 1_000));
});

test('a pair of derived ids: the first is the derived id of the same inputs, the second from the digest\'s next 12 bytes', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2_000; i++) {
    const [ms, seed, index] = [1_796_604_605_033 + (i % 3), `rjb_${i % 7}`, i * 13];
    const [first, second] = derivedIdPair(['evt', 'exe'], ms, seed, index);
    assert.equal(first, derivedId('evt', ms, seed, index));
    assert.equal(second, byDefinition('exe', ms, seed, index, 12));
    assert.match(second, ID_PATTERN);
    seen.add(second.slice(4));
  }
  assert.equal(seen.size, 2_000, 'no two positions share an execution id');
});
