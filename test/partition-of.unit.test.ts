import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { endpointPartition, flowKeyPartition, monitorPartition, taskPartition } from '../src/commands/partition/partition-of.ts';

const ORG = 'org_0123456789abcdefghij';

describe('partitions', () => {
  // Every process of a deployment, of any version, must agree on who owns what: these
  // values were given by the first version (FNV-1a over `<org>\n<unit>`) and must not move.
  test('a unit lands where every earlier version put it', () => {
    assert.deepEqual(
      ['mon_a', 'mon_7f3k2p9q1x0z5c8v4b6n', 'mon_é✓'].map((id) => [monitorPartition(ORG, id, 8), monitorPartition(ORG, id, 256)]),
      [[4, 12], [5, 21], [5, 149]],
    );
    assert.equal(taskPartition({ org_id: ORG, id: 'tsk_1', lane: null }, 8), 3);
    assert.equal(taskPartition({ org_id: ORG, id: 'tsk_1', lane: 'emails' }, 8), 3);
    assert.equal(flowKeyPartition(ORG, 'user-42', 8), 0);
    assert.equal(endpointPartition(ORG, 'ep_1', 8), 6);
  });
});
