import assert from 'node:assert/strict';
import { test } from 'node:test';
import { taskPartition } from '../src/commands/partition/partition-of.ts';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../src/config.ts';
import { serve } from '../src/runtime/serve.ts';
import { eventually, secondLog, startTestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// A deployment that ran tasks through DISPATCH switches to partition owners: what ran
// is not run again, what waits (a delayed task's timer in TIMERS) runs once, by the owners.

const PARTITIONS = 8;

test('switching from DISPATCH to partition owners: refused beside live processes of the other mode; after a stop of all, nothing that ran runs again, a waiting task runs once', { timeout: 180_000 }, async () => {
  const target = await startTarget();
  const svc = await startTestService({ JETCRON_DISPATCH: 'queue', JETCRON_PARTITIONS: String(PARTITIONS) });
  try {
    const { api, orgId } = await svc.createOrg('pro');
    const create = async (body: Record<string, unknown>) => {
      const res = await api('POST', '/tasks', body);
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.data as { id: string; last_execution_id: string };
    };
    const status = async (id: string) => (await api('GET', `/executions/${id}`)).body.data.status as string;
    const ran = (path: string) => target.received.filter((r) => r.path === path).length;

    // Under DISPATCH: a task that runs, a lane that runs, a task that waits past the switch.
    const done = [await create({ url: `${target.url}/before` })];
    for (let i = 0; i < 3; i++) done.push(await create({ url: `${target.url}/lane-before/${i}`, lane: 'switch' }));
    const waiting = await create({ url: `${target.url}/waiting`, run_at: new Date(Date.now() + 4_000).toISOString() });
    // DISPATCH would run a key's tasks unbounded: flow control is refused, not ignored.
    for (const [p, body] of [['/tasks', { url: `${target.url}/keyed`, flow_control: { key: 'k', parallelism: 1 } }], ['/tasks/batch', { flow_control: { key: 'k', rate: 1 }, tasks: [{ url: `${target.url}/keyed` }] }]] as const) {
      const refused = await api('POST', p, body);
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.equal(refused.body.error.field, 'flow_control');
      assert.match(refused.body.error.message, /JETCRON_DISPATCH=owners/);
    }
    await eventually(async () => (await Promise.all(done.map((t) => status(t.last_execution_id)))).every((s) => s === 'success'), 30_000);
    assert.equal(await status(waiting.last_execution_id), 'pending');

    // A process in the other mode beside the live ones is refused: both would send the same tasks.
    const beside = (mode: string, roles: string) => serve(loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, JETCRON_ALLOW_PRIVATE_TARGETS: '1', JETCRON_DISPATCH: mode },
      { roles, dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-mode-')) },
    ), secondLog);
    await assert.rejects(beside('owners', 'dispatcher'), (err: Error) => err instanceof ConfigError && /live processes of this deployment send tasks the other way: pid \d+ .*JETCRON_DISPATCH=queue/.test(err.message));
    // The same mode joins, and a process without those roles is not asked.
    for (const [mode, roles] of [['queue', 'dispatcher'], ['owners', 'api']] as const) await (await beside(mode, roles)).stop();

    await svc.restart({ JETCRON_DISPATCH: 'owners' });

    // Every owner has read the log from its start and sends: a task in each partition has run, twice over.
    const lanes = Array.from({ length: PARTITIONS }, (_, p) => {
      for (let n = 0; ; n++) if (taskPartition({ org_id: orgId, id: '', lane: `probe-${n}` }, PARTITIONS) === p) return `probe-${n}`;
    });
    for (const round of [1, 2]) {
      const probes = await Promise.all(lanes.map((lane) => create({ url: `${target.url}/probe/${round}/${lane}`, lane })));
      await eventually(async () => (await Promise.all(probes.map((t) => status(t.last_execution_id)))).every((s) => s === 'success'), 60_000);
    }
    await eventually(async () => (await status(waiting.last_execution_id)) === 'success', 60_000);

    assert.equal(ran('/before'), 1, 'a task that ran under DISPATCH is not run again');
    for (let i = 0; i < 3; i++) assert.equal(ran(`/lane-before/${i}`), 1, `lane task ${i} ran once`);
    assert.equal(ran('/waiting'), 1, 'the waiting task ran once, by the owners (its old timer sends nothing)');
    const exe = (await api('GET', `/executions/${waiting.last_execution_id}`)).body.data;
    assert.equal(exe.attempt, 1);
  } finally {
    await svc.stop();
    await target.close();
  }
});
