import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';

// interval 60 s → 600 ms; grace 60 s → 600 ms.
const SCALE = 0.01;

describe('heartbeat monitors', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  const status = async (id: string) => (await api('GET', `/monitors/${id}`)).body.data.status;
  /**
   * Just pinged: up, as read by an answer that came back before the next ping was due.
   * The interval is 600 ms here, so a busy machine can answer later, when the monitor
   * may rightly be down already: then only its reason is checked.
   */
  const upUntilDue = async (id: string) => {
    const m = (await api('GET', `/monitors/${id}`)).body.data;
    if (Date.now() < Date.parse(m.next_expected_at)) assert.equal(m.status, 'up');
    else assert.ok(m.status === 'up' || (m.status === 'down' && m.down_reason === 'missed'), `${m.status} (${m.down_reason})`);
    return m;
  };
  const ping = (url: string, init?: RequestInit) => fetch(url, init).then(async (r) => ({ status: r.status, body: await r.json() as any }));

  test('new → up on a ping → down when a ping is late → up again; /fail goes down at once', async () => {
    const res = await api('POST', '/monitors', { name: 'backup', schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: 0 });
    assert.equal(res.status, 201);
    const m = res.body.data;
    assert.equal(m.status, 'new');
    assert.match(m.ping_url, new RegExp(`^${svc.url}/ping/pm_[0-9a-z]{32}$`));
    assert.equal(m.grace_period_seconds, 0);
    await new Promise((r) => setTimeout(r, 900));
    assert.equal(await status(m.id), 'new', 'a monitor never pinged does not go down');

    const first = await ping(m.ping_url, { method: 'POST', body: 'x'.repeat(120_000), headers: { 'User-Agent': 'cron-job/1.0' } });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { monitor: 'backup', status: 'up' });
    const up = await upUntilDue(m.id);
    assert.ok(up.last_ping_at && up.next_expected_at);

    await eventually(async () => (await status(m.id)) === 'down', 30_000);
    assert.equal((await ping(m.ping_url)).body.status, 'up');
    await upUntilDue(m.id);
    const fail = await ping(`${m.ping_url}/fail`);
    assert.equal(fail.status, 200);
    assert.equal(fail.body.status, 'down');
    assert.equal(await status(m.id), 'down');

    const pings = (await api('GET', `/monitors/${m.id}/pings?limit=10`)).body.data;
    assert.equal(pings.length, 3);
    const oldest = pings.at(-1);
    assert.equal(oldest.method, 'POST');
    assert.equal(oldest.user_agent, 'cron-job/1.0');
    assert.equal(oldest.body.length, 100 * 1024, 'the first 100 KB of the body');
    assert.ok(oldest.source_ip);
    assert.equal(pings[0].kind, 'fail');
    assert.equal(oldest.kind, 'success');
    assert.equal((await api('GET', `/monitors/${m.id}`)).body.data.down_reason, 'failed');
  });

  test('a paused monitor answers 410 and never goes down; resume; unknown token 404', async () => {
    const m = (await api('POST', '/monitors', { name: 'nightly', schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: 0 })).body.data;
    await ping(m.ping_url);
    const paused = await api('POST', `/monitors/${m.id}/pause`);
    assert.equal(paused.status, 200);
    assert.equal(paused.body.data.status, 'paused');
    assert.equal((await ping(m.ping_url)).status, 410);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await status(m.id), 'paused');
    const resumed = await api('POST', `/monitors/${m.id}/resume`);
    assert.equal(resumed.body.data.status, 'up');
    assert.equal((await ping(m.ping_url)).status, 200);
    assert.equal((await ping(`${svc.url}/ping/pm_${'0'.repeat(32)}`)).status, 404);
    await api('PUT', `/monitors/${m.id}`, { enabled: false });
    assert.equal((await ping(m.ping_url)).status, 410);
  });

  test('validation, cron monitors, delete, and the Free plan limit', async () => {
    for (const [body, field] of [
      [{ name: 'a', schedule_type: 'interval', interval_seconds: 59 }, 'interval_seconds'],
      [{ name: 'a', schedule_type: 'interval', interval_seconds: 604801 }, 'interval_seconds'],
      [{ name: 'a', schedule_type: 'interval' }, 'interval_seconds'],
      [{ name: 'a', schedule_type: 'cron' }, 'cron_expression'],
      [{ name: 'a', schedule_type: 'cron', cron_expression: 'nope' }, 'cron_expression'],
      [{ name: 'a', schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: 3601 }, 'grace_period_seconds'],
      [{ schedule_type: 'interval', interval_seconds: 60 }, 'name'],
      [{ name: 'a', schedule_type: 'weekly' }, 'schedule_type'],
    ] as const) {
      const r = await api('POST', '/monitors', body);
      assert.equal(r.status, 422, JSON.stringify(body));
      assert.equal(r.body.error.field, field);
    }
    const c = await api('POST', '/monitors', { name: 'c', schedule_type: 'cron', cron_expression: '0 3 * * *', timezone: 'Europe/Berlin' });
    assert.equal(c.status, 201);
    assert.equal(c.body.data.grace_period_seconds, 300);
    // Pinged once first, so the service knows its token when the monitor is deleted.
    assert.equal((await ping(c.body.data.ping_url)).status, 200);
    assert.equal((await api('DELETE', `/monitors/${c.body.data.id}`)).status, 204);
    assert.equal((await api('GET', `/monitors/${c.body.data.id}`)).status, 404);
    assert.equal((await ping(c.body.data.ping_url)).status, 404);
    const { api: free } = await svc.createOrg();
    for (let i = 0; i < 10; i++) assert.equal((await free('POST', '/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600 })).status, 201);
    assert.equal((await free('POST', '/monitors', { name: 'm11', schedule_type: 'interval', interval_seconds: 3600 })).status, 403);
  });
});
