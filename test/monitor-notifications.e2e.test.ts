import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { notifierIdle } from './support/positions.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

describe('monitor and schedule notifications', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.01' });
    api = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  test('a monitor that misses, recovers, misses again: down, recovered, down — one each, with the exact events', async () => {
    const hook = await startTarget();
    try {
      await api('PUT', '/organization', { notification_webhook_url: `${hook.url}/org` });
      const m = (await api('POST', '/monitors', {
        name: 'db-backup', schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: 0, on_recovery_url: `${hook.url}/own`,
      })).body.data;
      await fetch(m.ping_url);
      await eventually(async () => hook.received.some((r) => r.path === '/org'), 30_000);
      await new Promise((r) => setTimeout(r, 800)); // stays down a while: still one notification
      await fetch(m.ping_url);
      await eventually(async () => hook.received.filter((r) => r.path === '/org').length === 2, 30_000);
      await eventually(async () => hook.received.filter((r) => r.path === '/org').length === 3, 30_000);
      const events = hook.received.filter((r) => r.path === '/org').map((r) => JSON.parse(r.body));
      assert.deepEqual(events.map((e) => e.event), ['monitor.down', 'monitor.recovered', 'monitor.down']);
      assert.equal(events[0].monitor.id, m.id);
      assert.equal(events[0].monitor.name, 'db-backup');
      assert.match(events[0].text, /db-backup/);
      assert.equal(events[0].content, events[0].text);
      const own = hook.received.filter((r) => r.path === '/own').map((r) => JSON.parse(r.body));
      assert.deepEqual(own.map((e) => e.event), ['monitor.recovered']);
    } finally {
      await hook.close();
    }
  });

  test('a failing schedule notifies once as schedule.failed', async () => {
    const hook = await startTarget((req) => ({ status: req.path === '/job' ? 500 : 200 }));
    try {
      const { api: org, orgId } = await svc.createOrg();
      await org('PUT', '/organization', { notification_webhook_url: `${hook.url}/org` });
      const s = (await org('POST', '/schedules', { url: `${hook.url}/job`, cron: '*/1 * * * * *', retry_attempts: 0 })).body.data;
      await eventually(async () => hook.received.filter((r) => r.path === '/job').length >= 3, 30_000);
      await org('DELETE', `/schedules/${s.id}`);
      // The notifier has handled every failure so far: one notification, not one per run.
      await notifierIdle(svc.natsUrl, orgId);
      const events = hook.received.filter((r) => r.path === '/org').map((r) => JSON.parse(r.body));
      assert.deepEqual(events.map((e) => e.event), ['schedule.failed']);
      assert.equal(events[0].schedule.id, s.id);
    } finally {
      await hook.close();
    }
  });
});
