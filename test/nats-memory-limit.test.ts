import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultNatsMemoryLimit, natsServerEnv } from '../src/runtime/nats-memory-limit.ts';

test('the default limit is a 64 MiB floor plus 32 MiB per core, at least one core', () => {
  assert.equal(defaultNatsMemoryLimit(2), '128MiB');
  assert.equal(defaultNatsMemoryLimit(8), '320MiB');
  assert.equal(defaultNatsMemoryLimit(0), '96MiB');
});

test('nats-server\'s environment: the given settings, GOMEMLIMIT defaulted only where none is set', () => {
  assert.deepEqual(natsServerEnv({ PATH: '/bin' }, { GODEBUG: 'gctrace=1' }, 2), { PATH: '/bin', GODEBUG: 'gctrace=1', GOMEMLIMIT: '128MiB' });
  assert.equal(natsServerEnv({ GOMEMLIMIT: '1GiB' }, {}, 2).GOMEMLIMIT, '1GiB');
  assert.equal(natsServerEnv({ GOMEMLIMIT: '1GiB' }, { GOMEMLIMIT: 'off' }, 2).GOMEMLIMIT, 'off');
  assert.equal(natsServerEnv({ GOMEMLIMIT: '' }, {}, 2).GOMEMLIMIT, '128MiB');
});
