import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { nextTick } from '../src/commands/schedule/cron.ts';
import { loadConfig } from '../src/config.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { eventually, startTestService, type Api, type TestService, secondLog } from './support/service.ts';
import { startTarget } from './support/target.ts';

describe('cron dialect and time zones', () => {
  test('a daily 02:30 local job skips the missing hour and is not doubled on the repeated one', () => {
    // Europe/Berlin: 2026-03-29 02:00 → 03:00 (no 02:30); 2026-10-25 03:00 → 02:00 (02:30 twice).
    const afterSpring = nextTick('30 2 * * *', 'Europe/Berlin', Date.parse('2026-03-28T02:00:00Z'));
    assert.ok(afterSpring.getTime() > Date.parse('2026-03-29T00:00:00Z'));
    assert.notEqual(afterSpring.toISOString(), '2026-03-29T00:30:00.000Z', 'no tick inside the skipped hour');
    const before = nextTick('0 12 * * *', 'America/New_York', Date.parse('2026-03-07T00:00:00Z'));
    const after = nextTick('0 12 * * *', 'America/New_York', Date.parse('2026-03-09T00:00:00Z'));
    assert.equal(before.toISOString(), '2026-03-07T17:00:00.000Z', 'noon EST = 17:00Z');
    assert.equal(after.toISOString(), '2026-03-09T16:00:00.000Z', 'noon EDT = 16:00Z');
  });
});

describe('schedules', () => {
  let svc: TestService;
  let api: Api;
  let second: Running;
  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg()).api;
    const config = loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, JETCRON_ALLOW_PRIVATE_TARGETS: '1' },
      { roles: 'scheduler,dispatcher', dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-sch-')) },
    );
    second = await serve(config, secondLog);
  });
  after(async () => {
    await second.stop();
    await svc.stop();
  });

  test('a 6-field cron ticks every second, once per tick with two schedulers; delete stops it', async () => {
    const target = await startTarget();
    try {
      const res = await api('POST', '/schedules', { url: `${target.url}/tick`, cron: '*/1 * * * * *' });
      assert.equal(res.status, 201);
      const s = res.body.data;
      assert.equal(s.method, 'GET');
      assert.equal(s.timezone, 'UTC');
      assert.ok(Date.parse(s.next_run_at) > Date.now() - 1000);
      await eventually(async () => target.received.length >= 4, 30_000);
      const ids = target.received.map((r) => r.headers['x-jetcron-execution-id']);
      assert.equal(new Set(ids).size, ids.length, 'one execution per tick');
      // Never two runs of one tick (with two schedulers): each execution is for its own second.
      // (When they arrive is not checked: a busy machine may deliver one tick late, next to the following one.)
      const history = (await api('GET', `/schedules/${s.id}/executions?limit=100`)).body.data;
      const ticks = history.map((e: { scheduled_for: string }) => e.scheduled_for);
      assert.equal(new Set(ticks).size, ticks.length, `two executions for one tick: ${ticks}`);
      assert.equal((await api('GET', `/schedules/${s.id}/executions?limit=2`)).body.data.length, 2);
      assert.equal((await api('DELETE', `/schedules/${s.id}`)).status, 204);
      const n = target.received.length;
      // A witness with the same cron, made after the delete: once it has ticked twice, the
      // deleted schedule's next ticks were due as well.
      const witness = await api('POST', '/schedules', { url: `${target.url}/witness`, cron: '*/1 * * * * *' });
      assert.equal(witness.status, 201, JSON.stringify(witness.body));
      await eventually(async () => target.received.filter((r) => r.path === '/witness').length >= 2, 30_000);
      assert.equal((await api('DELETE', `/schedules/${witness.body.data.id}`)).status, 204);
      assert.ok(target.received.filter((r) => r.path === '/tick').length <= n + 1, 'stopped after delete');
      assert.equal((await api('GET', `/schedules/${s.id}`)).status, 404);
    } finally {
      await target.close();
    }
  });

  test('trigger runs now; update and validation; the Free plan holds 10', async () => {
    const target = await startTarget();
    try {
      const s = (await api('POST', '/schedules', { url: `${target.url}/t`, cron: '0 0 1 1 *', timezone: 'Europe/Berlin', method: 'POST', body: 'x' })).body.data;
      const trig = await api('POST', `/schedules/${s.id}/trigger`);
      assert.equal(trig.status, 202);
      await eventually(async () => target.received.some((r) => r.path === '/t'));
      assert.equal(target.received[0]!.body, 'x');
      const e = (await api('GET', `/executions/${trig.body.data.execution_id}`)).body.data;
      assert.equal(e.task.type, 'schedule');
      const upd = await api('PUT', `/schedules/${s.id}`, { name: 'renamed', cron: '@daily' });
      assert.equal(upd.status, 200);
      assert.equal(upd.body.data.name, 'renamed');
      for (const [body, field] of [
        [{ url: target.url, cron: 'every minute' }, 'cron'],
        [{ url: target.url, cron: '61 * * * *' }, 'cron'],
        [{ url: target.url, cron: '* * * *' }, 'cron'],
        [{ url: target.url, cron: '* * * * *', timezone: 'Mars/Olympus' }, 'timezone'],
        [{ cron: '* * * * *' }, 'url'],
        [{ url: target.url, cron: '* * * * *', bogus: 1 }, 'bogus'],
      ] as const) {
        const r = await api('POST', '/schedules', body);
        assert.equal(r.status, 422, JSON.stringify(body));
        assert.equal(r.body.error.field, field);
      }
      const { api: free } = await svc.createOrg();
      for (let i = 0; i < 10; i++) assert.equal((await free('POST', '/schedules', { url: target.url, cron: '0 0 1 1 *' })).status, 201);
      const eleventh = await free('POST', '/schedules', { url: target.url, cron: '0 0 1 1 *' });
      assert.equal(eleventh.status, 403);
    } finally {
      await target.close();
    }
  });
});
