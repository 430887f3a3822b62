import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageCache } from '../src/http/page-cache.ts';

test('a page serves only while the projector stands where it stood when the query began', () => {
  const cache = new PageCache();
  cache.set('org_a /executions', 10, 'page at 10');
  assert.equal(cache.get('org_a /executions', 10), 'page at 10');
  assert.equal(cache.get('org_b /executions', 10), undefined, 'another organization or query is another key');
  assert.equal(cache.get('org_a /executions', 11), undefined, 'anything projected since makes it stale');
  assert.equal(cache.get('org_a /executions', 10), undefined, 'and a stale entry is gone');
});

test('bounded: the oldest entries go first', () => {
  const cache = new PageCache(3);
  for (let i = 0; i < 5; i++) cache.set(`k${i}`, 1, `v${i}`);
  assert.equal(cache.size, 3);
  assert.equal(cache.get('k0', 1), undefined);
  assert.equal(cache.get('k1', 1), undefined);
  assert.equal(cache.get('k4', 1), 'v4');
});
