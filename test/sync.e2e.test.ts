import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestService, type Api, type TestService } from './support/service.ts';

describe('PUT /sync', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg('pro')).api;
  });
  after(() => svc.stop());

  const config = (cron = '0 3 * * *') => ({
    schedules: [
      { key: 'nightly', name: 'Nightly', url: 'https://example.com/nightly', cron },
      { key: 'hourly', url: 'https://example.com/hourly', cron: '@hourly', method: 'POST', body: 'x' },
    ],
    monitors: [{ key: 'backup', name: 'Backup', schedule_type: 'interval', interval_seconds: 3600, grace_seconds: 60 }],
  });

  test('creates, leaves unchanged, updates and deletes by key; repeating changes nothing', async () => {
    const manual = await api('POST', '/schedules', { url: 'https://example.com/manual', cron: '@daily' });
    assert.equal(manual.status, 201);

    const first = await api('PUT', '/sync', config());
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.data, {
      schedules: { created: 2, updated: 0, unchanged: 0, deleted: 0 },
      monitors: { created: 1, updated: 0, unchanged: 0, deleted: 0 },
    });
    const again = await api('PUT', '/sync', config());
    assert.deepEqual(again.body.data, {
      schedules: { created: 0, updated: 0, unchanged: 2, deleted: 0 },
      monitors: { created: 0, updated: 0, unchanged: 1, deleted: 0 },
    });
    const listed = (await api('GET', '/schedules')).body.data;
    assert.equal(listed.length, 3);
    const nightly = listed.find((s: { name: string }) => s.name === 'Nightly');
    assert.equal(nightly.method, 'GET');
    const mon = (await api('GET', '/monitors')).body.data[0];
    assert.equal(mon.grace_period_seconds, 60);

    const changed = await api('PUT', '/sync', config('0 4 * * *'));
    assert.deepEqual(changed.body.data.schedules, { created: 0, updated: 1, unchanged: 1, deleted: 0 });
    assert.equal((await api('GET', `/schedules/${nightly.id}`)).body.data.cron, '0 4 * * *');

    const pruned = await api('PUT', '/sync', { schedules: [config().schedules[0]], monitors: [], delete_removed: true });
    assert.deepEqual(pruned.body.data, {
      schedules: { created: 0, updated: 1, unchanged: 0, deleted: 1 },
      monitors: { created: 0, updated: 0, unchanged: 0, deleted: 1 },
    });
    const left = (await api('GET', '/schedules')).body.data.map((s: { url: string }) => s.url).sort();
    assert.deepEqual(left, ['https://example.com/manual', 'https://example.com/nightly'], 'schedules not made by sync are kept');
  });

  test('an invalid item rejects the whole call with its index', async () => {
    const before = (await api('GET', '/schedules')).body.data.length;
    const bad = await api('PUT', '/sync', {
      schedules: [{ key: 'a', url: 'https://example.com/a', cron: '@daily' }, { key: 'b', url: 'https://example.com/b', cron: 'not cron' }],
    });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.field, 'schedules[1].cron');
    const dup = await api('PUT', '/sync', { schedules: [{ key: 'a', url: 'https://example.com/a', cron: '@daily' }, { key: 'a', url: 'https://example.com/b', cron: '@daily' }] });
    assert.equal(dup.body.error.field, 'schedules[1].key');
    const mon = await api('PUT', '/sync', { monitors: [{ key: 'm', name: 'm', schedule_type: 'cron' }] });
    assert.equal(mon.body.error.field, 'monitors[0].cron_expression');
    const typo = await api('PUT', '/sync', { schedules: [{ key: 'a', url: 'https://example.com/a', cron: '@daily', crn: 1 }] });
    assert.equal(typo.body.error.field, 'schedules[0].crn');
    assert.equal((await api('GET', '/schedules')).body.data.length, before);
  });
});
