/**
 * The start-up guards against mixed modes (src/runtime/mode-guards.ts), against a real
 * nats-server's roll call: a process is refused beside live processes that send tasks
 * (JETCRON_DISPATCH) or decide pings (JETCRON_MONITOR_OWNERS) the other way.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ConfigError, type Role } from '../src/config.ts';
import type { Nats } from '../src/nats/connection.ts';
import { answerRollCall } from '../src/nats/roll-call.ts';
import { guardModes, otherMonitorModes } from '../src/runtime/mode-guards.ts';
import { startNatsWithStreams } from './support/nats.ts';

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
before(async () => {
  server = await startNatsWithStreams();
  nats = await server.connect('mode guards');
});
after(async () => {
  await nats.close();
  await server.stop();
});

const config = (roles: Role[], monitorOwners: boolean) => ({ roles: new Set(roles), dispatchMode: 'owners' as const, monitorOwners });
const live = (roles: string[], monitors?: 'owners' | 'subjects') =>
  answerRollCall(nats, { instance: `live-${roles.join('-')}`, roles, group: undefined, dispatch: 'owners', ...(monitors ? { monitors } : {}) });

test('monitor owners: refused beside a live API or scheduler process deciding pings the other way (or of a version that does not say: it ran without owners), allowed beside its own mode', async () => {
  const stop = live(['api'], 'subjects');
  try {
    await assert.rejects(guardModes(nats, config(['api'], true)), (err: Error) => err instanceof ConfigError && /JETCRON_MONITOR_OWNERS=1, but live processes .*pid \d+ .*JETCRON_MONITOR_OWNERS=0/.test(err.message));
    await guardModes(nats, config(['scheduler', 'api'], false));
    // A process with no role that depends on it starts beside either.
    await guardModes(nats, config(['projector', 'notifier'], true));
  } finally {
    stop();
  }
  const owners = live(['scheduler'], 'owners');
  try {
    await guardModes(nats, config(['api'], true));
    await assert.rejects(guardModes(nats, config(['api'], false)), ConfigError);
  } finally {
    owners();
  }
  assert.equal(otherMonitorModes([{ instance: 'old', roles: ['api'], pid: 1, host: 'h', group: null, started_at: '', uptime_seconds: 0 }], true).length, 1, 'a version that does not say ran without owners');
});
