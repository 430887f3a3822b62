import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideBatch, evolveBatch, type BatchCommand, type BatchInput } from '../../src/commands/batch/decide.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';
import { parentOf } from '../../src/lib/ids.ts';

const spec = deciderSpec(decideBatch, evolveBatch);
const ORG = 'org_batch';
const accept = (input: Partial<BatchInput> = {}): BatchCommand => ({
  type: 'AcceptBatch',
  orgId: ORG,
  plan: 'free',
  batchId: 'cmd_1',
  input: { lane: 'emails', tasks: [{ url: 'https://a.example.com/1' }, { url: 'https://b.example.com/2', method: 'PUT', headers: { 'X-B': '2' } }], ...input },
});

describe('batch decider', () => {
  test('one commit: each task\'s TaskCreated under an id naming the batch, then the BatchAccepted that counts them; one run time, shared fields under each task\'s own', () => {
    const events = spec.given([]).when(accept({ delay: '1m', method: 'PATCH', headers: { 'X-A': '1', 'X-B': 'shared' }, retry_attempts: 2 })).thenMatches([
      { type: 'TaskCreated', org_id: ORG, data: { task: { id: 'tsk_1u0', lane: 'emails', method: 'PATCH', headers: { 'X-A': '1', 'X-B': 'shared' }, retry_attempts: 2, delay: '1m' }, execution: { scheduled_for: later(60_000) } } },
      { type: 'TaskCreated', org_id: ORG, data: { task: { id: 'tsk_1u1', method: 'PUT', headers: { 'X-A': '1', 'X-B': '2' } }, execution: { scheduled_for: later(60_000) } } },
      { type: 'BatchAccepted', id: 'evt_test', at: NOW, org_id: ORG, data: { batch_id: 'cmd_1', lane: 'emails', scheduled_for: later(60_000), created: 2 } },
    ]);
    assert.equal(new Set(events.map((e) => e.id)).size, 3, 'every event has its own id');
    assert.equal((events[2]!.data as { tasks?: unknown }).tasks, undefined, 'the tasks are the commit\'s events, not carried twice');
    assert.equal(parentOf('tsk_1u1', 'cmd'), 'cmd_1');
  });

  test('already accepted (its id derives from an Idempotency-Key): nothing new', () => {
    const accepted = decideBatch(accept(), null, meta());
    spec.given(accepted).when(accept({ tasks: [{ url: 'https://c.example.com/' }] })).thenNothing();
  });

  test('a malformed delay: 422, nothing accepted', () => {
    spec.given([]).when(accept({ delay: '1 minute' })).thenRefuses({ status: 422, field: 'delay' });
  });
});
