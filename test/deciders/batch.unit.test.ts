import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideBatch, evolveBatch, type BatchCommand, type BatchInput } from '../../src/commands/batch/decide.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

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
  test('one BatchAccepted carrying every task, one run time, shared fields under each task\'s own', () => {
    const [event] = spec.given([]).when(accept({ delay: '1m', method: 'PATCH', headers: { 'X-A': '1', 'X-B': 'shared' }, retry_attempts: 2 })).thenMatches([{
      type: 'BatchAccepted',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: {
        batch_id: 'cmd_1',
        lane: 'emails',
        scheduled_for: later(60_000),
        tasks: [
          { type: 'TaskCreated', org_id: ORG, data: { task: { id: 'tsk_1', lane: 'emails', method: 'PATCH', headers: { 'X-A': '1', 'X-B': 'shared' }, retry_attempts: 2, delay: '1m' }, execution: { id: 'exe_1', scheduled_for: later(60_000) } } },
          { type: 'TaskCreated', org_id: ORG, data: { task: { id: 'tsk_2', method: 'PUT', headers: { 'X-A': '1', 'X-B': '2' } }, execution: { id: 'exe_2', scheduled_for: later(60_000) } } },
        ],
      },
    }]);
    const ids = event!.data.tasks.map((t) => t.id);
    assert.equal(new Set([event!.id, ...ids]).size, 3, 'every task event has its own id');
  });

  test('already accepted (its id derives from an Idempotency-Key): nothing new', () => {
    const accepted = decideBatch(accept(), null, meta());
    spec.given(accepted).when(accept({ tasks: [{ url: 'https://c.example.com/' }] })).thenNothing();
  });

  test('a malformed delay: 422, nothing accepted', () => {
    spec.given([]).when(accept({ delay: '1 minute' })).thenRefuses({ status: 422, field: 'delay' });
  });
});
