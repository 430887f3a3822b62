import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { SUBJECTS } from '../streams/subjects.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { lastTaskEvent } from '../src/commands/task/load.ts';
import { connectNats } from '../src/nats/connection.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// 1 service minute = 60 ms.
const SCALE = '0.001';

describe('restart and replay', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: SCALE });
    api = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  test('delayed and retrying tasks pending across a restart still run, once each', async () => {
    const calls = new Map<string, number>();
    const target = await startTarget((req) => {
      const n = (calls.get(req.path) ?? 0) + 1;
      calls.set(req.path, n);
      return { status: req.path.startsWith('/retry') && n <= 2 ? 500 : 200 };
    });
    try {
      const delayed = [];
      for (let i = 0; i < 5; i++) delayed.push((await api('POST', '/tasks', { url: `${target.url}/delayed/${i}`, delay: '15m' })).body.data);
      const retrying = (await api('POST', '/tasks', { url: `${target.url}/retry` })).body.data;
      await eventually(async () => calls.get('/retry') === 1);

      await svc.stopService();
      // Every delayed task comes due while the service is down (a clock reading, not a guess of how long that takes).
      const lastDue = Math.max(...delayed.map((t) => Date.parse(t.next_run_at)));
      await eventually(async () => Date.now() > lastDue + 50, 60_000, 20);
      await svc.startService();

      for (const t of delayed) {
        const exe = await eventually(async () => {
          const e = (await api('GET', `/executions/${t.last_execution_id}`)).body.data;
          return e.status === 'success' ? e : null;
        });
        assert.equal(exe.attempt, 1);
      }
      const r = await eventually(async () => {
        const e = (await api('GET', `/executions/${retrying.last_execution_id}`)).body.data;
        return e.status === 'success' ? e : null;
      });
      assert.equal(r.attempt, 3);
      // Every execution final: what ran is all that will. None ran before it was due.
      for (let i = 0; i < 5; i++) assert.equal(calls.get(`/delayed/${i}`), 1, `delayed ${i} ran ${calls.get(`/delayed/${i}`)} times`);
      for (const [i, t] of delayed.entries()) {
        const ran = target.received.find((x) => x.path === `/delayed/${i}`)!.at;
        assert.ok(ran >= Date.parse(t.next_run_at) - 15, `delayed ${i} ran ${Date.parse(t.next_run_at) - ran} ms early`);
      }
      assert.equal(calls.get('/retry'), 3);
    } finally {
      await target.close();
    }
  });

  test('projections rebuild gives the same API answers', async () => {
    const api = (await svc.createOrg()).api;
    const target = await startTarget((req) => ({ status: req.path === '/fail' ? 400 : 200, body: 'body' }));
    try {
      for (let i = 0; i < 5; i++) await api('POST', '/tasks', { url: `${target.url}/${i % 2 ? 'fail' : 'ok'}`, name: `t${i}` });
      const updated = (await api('POST', '/tasks', { url: `${target.url}/later`, delay: '1d' })).body.data;
      await api('PUT', `/tasks/${updated.id}`, { name: 'renamed', headers: { 'X-A': 'b' } });
      const gone = (await api('POST', '/tasks', { url: `${target.url}/gone`, delay: '1d' })).body.data;
      await api('DELETE', `/tasks/${gone.id}`);
      // Endpoints: one forwarding (paused, so one delivery stays held), one collect-only, one deleted.
      const ep = (await api('POST', '/endpoints', { name: 'hooks', forward_urls: [`${target.url}/ok`, `${target.url}/fail`], forward_headers: { 'X-F': '1' } })).body.data;
      const collect = (await api('POST', '/endpoints', { name: 'collect' })).body.data;
      for (const e of [ep, collect]) await fetch(e.inbound_url, { method: 'POST', body: '{"n":1}', headers: { 'Content-Type': 'application/json' } });
      await eventually(async () => (await api('GET', `/endpoints/${ep.id}/events`)).body.data[0]?.executions.every((x: any) => x.status !== 'pending'));
      await api('POST', `/endpoints/${ep.id}/pause`);
      await fetch(ep.inbound_url, { method: 'PUT', body: 'held' });
      await eventually(async () => (await api('GET', `/endpoints/${ep.id}/events`)).body.data.length === 2);
      await eventually(async () => (await api('GET', `/endpoints/${collect.id}/events`)).body.data.length === 1);
      const dropped = (await api('POST', '/endpoints', { name: 'dropped' })).body.data;
      await api('DELETE', `/endpoints/${dropped.id}`);
      await eventually(async () => (await api('GET', '/executions?status=pending')).body.data.length === 3);

      const snapshot = async () => {
        const tasks = (await api('GET', '/tasks')).body.data;
        const executions = (await api('GET', '/executions?limit=100')).body.data;
        const details = [];
        for (const e of executions) details.push((await api('GET', `/executions/${e.id}`)).body.data);
        // The restarted service listens on another port: compare inbound URLs by path.
        const endpoints = (await api('GET', '/endpoints')).body.data.map((e: any) => ({ ...e, inbound_url: new URL(e.inbound_url).pathname }));
        const events = [];
        for (const e of endpoints) events.push((await api('GET', `/endpoints/${e.id}/events`)).body.data);
        return { tasks, executions, details, endpoints, events, org: (await api('GET', '/organization')).body.data };
      };
      const before = await snapshot();
      assert.equal(before.tasks.length, 6);
      assert.equal(before.endpoints.length, 2);

      await svc.stopService();
      const printed: unknown[] = [];
      await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: (o) => printed.push(o) });
      assert.equal((printed[0] as { rebuilt: boolean }).rebuilt, true);
      await svc.startService();

      assert.deepEqual(await snapshot(), before);
    } finally {
      await target.close();
    }
  });
  test('a rebuild that meets an event Postgres refuses records it, skips it and rebuilds the rest', async () => {
    const { api, orgId } = await svc.createOrg();
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', name: `kept ${i}`, delay: '1d' })).body.data);
    const before = (await api('GET', '/tasks')).body.data;
    await svc.stopService();
    // Written while no projector runs: only the rebuild meets it. Postgres refuses the time.
    const nats = await connectNats(svc.natsUrl, 'rebuild test');
    let badSeq: number;
    try {
      const store = createEventStore(nats);
      const subject = SUBJECTS.task(orgId, made[1].id);
      // Its create: in its loop turn's commit, or on its own subject.
      const last = (await lastTaskEvent(store, orgId, made[1].id)) as any;
      const bad = { ...last, type: 'TaskUpdated', id: `evt_bad_${Date.now()}`, data: { task: { ...last.data.task, name: 'bad', updated_at: 'not a time' }, changed: ['name'] } };
      badSeq = await store.append(subject, bad, (await store.last(subject))?.seq ?? 0);
    } finally {
      await nats.close();
    }
    const logged: string[] = [];
    const printed: any[] = [];
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: (m) => logged.push(m), print: (o) => printed.push(o) });
    assert.equal(printed[0].rebuilt, true);
    assert.ok(logged.some((l) => l.includes(`SKIPPED seq ${badSeq}`)), logged.join('\n'));
    await svc.startService();
    assert.deepEqual((await api('GET', '/tasks')).body.data, before);
  });

  test('read models that lost commits (Postgres crashed; synchronous_commit is off) are projected again from their checkpoint', async () => {
    const { api } = await svc.createOrg();
    const db = new pg.Client({ connectionString: svc.databaseUrl });
    await db.connect();
    try {
      const checkpoint = async () => Number((await db.query(`SELECT seq FROM projection_checkpoints WHERE name = 'read_models_v1'`)).rows[0].seq);
      const from = await checkpoint();
      const lost = (await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', name: 'lost', delay: '1d' })).body.data;
      await eventually(async () => (await api('GET', `/tasks/${lost.id}`)).status === 200);
      // What a crash does to commits not yet flushed: their rows and checkpoint are gone.
      await db.query('DELETE FROM executions WHERE source_id = $1', [lost.id]);
      await db.query('DELETE FROM tasks WHERE id = $1', [lost.id]);
      await db.query(`UPDATE projection_checkpoints SET seq = $1 WHERE name = 'read_models_v1'`, [from]);
      // The next commit finds the checkpoint behind what it committed and goes back to it.
      await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', name: 'next', delay: '1d' });
      const again = await eventually(async () => {
        const r = await api('GET', `/tasks/${lost.id}`);
        return r.status === 200 && r.body.data;
      });
      assert.equal(again.name, 'lost');
      assert.equal(again.status, 'pending');
    } finally {
      await db.end();
    }
  });
});
