import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import { openHostBlocks, type HostBlocks } from '../src/dispatchers/host-blocks.ts';
import { hostBlockKey } from '../src/commands/host-block/rules.ts';
import { createClock } from '../src/lib/clock.ts';
import { applyStreams } from '../src/nats/apply-streams.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { eventually } from './support/service.ts';
import { startTestNats } from './support/nats.ts';

// Two dispatcher processes' views of the shared host state, on one real nats-server.
describe('host-blocks shared through KV', () => {
  let server: { url: string; stop(): Promise<void> };
  const conns: Nats[] = [];
  const views: HostBlocks[] = [];
  const clock = createClock(0.01); // 30 s block = 300 ms
  const log = () => {};
  before(async () => {
    server = await startTestNats();
    for (let i = 0; i < 2; i++) conns.push(await connectNats(server.url, `host-blocks test ${i}`));
    await applyStreams(conns[0]!, 1);
    for (const nats of conns) views.push(await openHostBlocks({ nats, clock, log }));
  });
  after(async () => {
    for (const v of views) await v.close();
    for (const c of conns) await c.close();
    await server.stop();
  });

  test('a 429 recorded by one dispatcher blocks the host for the other, for that org only', async () => {
    const [a, b] = [views[0]!, views[1]!];
    const s = await a.record('org_one', 'h1.example:443', { kind: 'rate_limited', blockMs: 60_000 });
    assert.ok(s && s.blocked_until > Date.now());
    assert.equal(a.blockedUntil('org_one', 'h1.example:443'), s.blocked_until);
    assert.equal(await eventually(async () => b.blockedUntil('org_one', 'h1.example:443'), 30_000, 5), s.blocked_until);
    assert.equal(b.blockedUntil('org_two', 'h1.example:443'), 0);
    assert.equal(b.blockedUntil('org_one', 'h2.example:443'), 0);
  });

  test('failures from both dispatchers count together; the 3rd blocks; a success on either clears it', async () => {
    const [a, b] = [views[0]!, views[1]!];
    const host = 'flaky.example:80';
    const t = Date.now();
    await Promise.all([
      a.record('org_one', host, { kind: 'failure', startedAt: t }),
      b.record('org_one', host, { kind: 'failure', startedAt: t }),
      a.record('org_one', host, { kind: 'failure', startedAt: t }),
    ]);
    const kv = await new Kvm(conns[0]!.nc).open(KV_BUCKETS.hostBlocks.name);
    const entry = await kv.get(hostBlockKey('org_one', host));
    const stored = entry!.json<{ failures: number; step: number; blocked_until: number }>();
    assert.equal(stored.failures, 3);
    assert.equal(stored.step, 1);
    assert.ok(stored.blocked_until - Date.now() <= 300 && stored.blocked_until > Date.now());
    await eventually(async () => a.blockedUntil('org_one', host) && b.blockedUntil('org_one', host), 30_000, 5);

    await eventually(async () => b.state('org_one', host)?.failures === 3, 30_000, 5);
    assert.equal(await b.record('org_one', host, { kind: 'up', startedAt: Date.now() }), null);
    assert.equal((await kv.get(hostBlockKey('org_one', host)))?.operation, 'DEL');
    await eventually(async () => a.blockedUntil('org_one', host) === 0 && a.state('org_one', host) === null, 30_000, 5);
  });

  test('a dispatcher that starts later loads the blocks that exist', async () => {
    await views[0]!.record('org_late', 'late.example:443', { kind: 'rate_limited', blockMs: 120_000 });
    const late = await openHostBlocks({ nats: conns[1]!, clock, log });
    try {
      assert.ok(late.blockedUntil('org_late', 'late.example:443') > Date.now());
    } finally {
      await late.close();
    }
  });
});
