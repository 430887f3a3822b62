import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { projectedUpToNow } from './support/positions.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';

// Free: 10 schedules, 10 monitors, 3 endpoints (the contract). Parallel creates used
// to read the same count from the read model and all pass.
describe('plan limits under concurrent creates', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(() => svc.stop());

  const statuses = (rs: Array<{ status: number }>) => {
    const count = (s: number) => rs.filter((r) => r.status === s).length;
    return { created: count(201), refused: count(403), other: rs.filter((r) => r.status !== 201 && r.status !== 403).map((r) => r.status) };
  };

  test('15 parallel schedule creates on Free: 10 created, 5 refused; a delete frees one place', async () => {
    const { api } = await svc.createOrg('free');
    const rs = await Promise.all(Array.from({ length: 15 }, (_, i) => api('POST', '/schedules', { name: `s${i}`, url: 'https://example.com/', cron: '0 0 1 1 *' })));
    assert.deepEqual(statuses(rs), { created: 10, refused: 5, other: [] });
    const list = (await api('GET', '/schedules')).body.data;
    assert.equal(list.length, 10);
    assert.equal((await api('DELETE', `/schedules/${list[0].id}`)).status, 204);
    assert.equal((await api('POST', '/schedules', { url: 'https://example.com/', cron: '0 0 1 1 *' })).status, 201);
    assert.equal((await api('POST', '/schedules', { url: 'https://example.com/', cron: '0 0 1 1 *' })).status, 403);
  });

  test('15 parallel monitor creates on Free: 10 created, 5 refused', async () => {
    const { api } = await svc.createOrg('free');
    const rs = await Promise.all(Array.from({ length: 15 }, (_, i) => api('POST', '/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600 })));
    assert.deepEqual(statuses(rs), { created: 10, refused: 5, other: [] });
    assert.equal((await api('GET', '/monitors')).body.data.length, 10);
  });

  test('sync counts with the API: 8 made by the API, a sync of 4 more stops at 10', async () => {
    const { api } = await svc.createOrg('free');
    for (let i = 0; i < 8; i++) assert.equal((await api('POST', '/schedules', { url: 'https://example.com/', cron: '0 0 1 1 *' })).status, 201);
    const schedules = Array.from({ length: 4 }, (_, i) => ({ key: `k${i}`, name: `k${i}`, url: 'https://example.com/', cron: '@daily' }));
    const res = await api('PUT', '/sync', { schedules });
    assert.equal(res.status, 403);
    // The items before the limit were made (a refused sync answers before they are projected).
    await eventually(async () => (await api('GET', '/schedules')).body.data.length === 10);
    // Everything written so far is projected: no eleventh is on its way.
    await projectedUpToNow(svc.natsUrl, svc.databaseUrl);
    assert.equal((await api('GET', '/schedules')).body.data.length, 10);
  });

  test('Pro: parallel creates are not limited', async () => {
    const { api }: { api: Api } = await svc.createOrg('pro');
    const rs = await Promise.all(Array.from({ length: 15 }, () => api('POST', '/endpoints', { name: 'e' })));
    assert.deepEqual(statuses(rs), { created: 15, refused: 0, other: [] });
  });
});
