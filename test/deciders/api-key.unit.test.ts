import { describe, test } from 'node:test';
import { decideApiKey, evolveApiKey } from '../../src/commands/api-key/decide.ts';
import type { ApiKeyCommand } from '../../src/commands/api-key/types.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideApiKey, evolveApiKey);
const PK = 'pk_000000000000000000000001';
const createKey: ApiKeyCommand = { type: 'CreateApiKey', orgId: 'org_k', publicId: PK, secretHash: 'ab'.repeat(32) };
const created = decideApiKey(createKey, null, meta());
const key = spec.stateAfter(created)!;

describe('api key decider', () => {
  test('create: the public id and the hash of the secret, never the secret', () => {
    spec.given([]).when(createKey).then([{
      type: 'ApiKeyCreated',
      id: 'evt_test',
      at: NOW,
      org_id: 'org_k',
      data: { key: { public_id: PK, org_id: 'org_k', secret_hash: 'ab'.repeat(32), created_at: NOW, revoked_at: null } },
    }]);
    spec.given(created).when(createKey).thenRefuses({ status: 409 });
  });

  test('revoke: stamped with the time; again: 409; an unknown key: 404', () => {
    const revoked = decideApiKey({ type: 'RevokeApiKey', publicId: PK }, key, meta(later(1000)));
    spec.given(created).when({ type: 'RevokeApiKey', publicId: PK }, meta(later(1000)))
      .then([{ type: 'ApiKeyRevoked', id: 'evt_test', at: later(1000), org_id: 'org_k', data: { key: { ...key, revoked_at: later(1000) } } }]);
    spec.given([...created, ...revoked]).when({ type: 'RevokeApiKey', publicId: PK }).thenRefuses({ status: 409, message: `api key ${PK} is already revoked` });
    spec.given([]).when({ type: 'RevokeApiKey', publicId: PK }).thenRefuses({ status: 404, message: `api key ${PK} not found` });
  });
});
