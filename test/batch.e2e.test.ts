import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { STREAMS } from '../streams/definitions.ts';
import { connectNats } from '../src/nats/connection.ts';
import { CREATE_SHARDS } from '../streams/subjects.ts';

describe('batches', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.001' });
    ({ api, orgId } = await svc.createOrg());
  });
  after(() => svc.stop());

  const taskCount = async () => (await api('GET', '/tasks')).body.data.length;

  test('a batch runs in its lane one at a time in batch order, with the defaults merged in', async () => {
    const target = await startTarget();
    try {
      const tasks = Array.from({ length: 60 }, (_, i) => ({
        url: `${target.url}/b/${i}`,
        ...(i === 0 ? { method: 'PUT', headers: { 'X-Override': 'task' }, body: { i }, name: 'first' } : {}),
      }));
      const res = await api('POST', '/tasks/batch', {
        lane: 'batch-1',
        tasks,
        method: 'PATCH',
        headers: { 'X-Default': 'd', 'X-Override': 'batch' },
        timeout_ms: 5000,
        retry_attempts: 2,
        callback_url: `${target.url}/cb`,
      });
      assert.equal(res.status, 201);
      assert.equal(res.body.data.lane, 'batch-1');
      assert.equal(res.body.data.created, 60);
      assert.ok(Date.parse(res.body.data.scheduled_for) <= Date.now());
      assert.match(res.body.message, /60/);
      // Read-your-writes: the tasks are listed at once.
      const listed = (await api('GET', '/tasks')).body.data.filter((t: { lane: string }) => t.lane === 'batch-1');
      assert.equal(listed.length, 60);
      const first = listed.find((t: { name: string }) => t.name === 'first');
      assert.equal(first.method, 'PUT');
      assert.deepEqual(first.headers, { 'X-Default': 'd', 'X-Override': 'task' });
      assert.equal(first.timeout_ms, 5000);
      assert.equal(first.retry_attempts, 2);
      assert.equal(first.callback_url, `${target.url}/cb`);
      assert.ok(listed.filter((t: { method: string }) => t.method === 'PATCH').length === 59);

      await eventually(async () => target.received.filter((r) => r.path.startsWith('/b/')).length === 60, 20_000);
      const order = target.received.filter((r) => r.path.startsWith('/b/')).map((r) => r.path);
      assert.deepEqual(order, tasks.map((t) => new URL(t.url).pathname));
      assert.equal(target.received.find((r) => r.path === '/b/0')!.body, '{"i":0}');
    } finally {
      await target.close();
    }
  });

  test('a batch is one message in the log; its tasks change, trigger and delete like any task, each then on a subject of its own', async () => {
    const nats = await connectNats(svc.natsUrl, 'batch commit test');
    try {
      // The organization's subjects and their message counts (other tests' work goes on meanwhile, elsewhere).
      const subjects = async () => (await nats.jsm.streams.info(STREAMS.events.name, { subjects_filter: `evt.${orgId}.>` })).state.subjects ?? {};
      const before = await subjects();
      const res = await api('POST', '/tasks/batch', { lane: 'commit-1', delay: '1h', tasks: Array.from({ length: 50 }, (_, i) => ({ url: `https://example.com/c/${i}` })) });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const after = await subjects();
      const added = Object.entries(after).filter(([subject, n]) => n !== (before[subject] ?? 0));
      assert.deepEqual(added.map(([subject, n]) => [subject.split('.')[2], n - (before[subject] ?? 0)]), [['creates', 1]], 'the batch and its 50 tasks are one message on one of the organization\'s create subjects');
      assert.ok(Object.keys(after).filter((s) => s.split('.')[2] === 'creates').length <= CREATE_SHARDS, 'create subjects are a fixed few per organization');
      const listed = (await api('GET', '/tasks')).body.data.filter((t: { lane: string }) => t.lane === 'commit-1');
      assert.equal(listed.length, 50);
      const [a, b, c] = listed as Array<{ id: string; last_execution_id: string }>;

      // Never changed: the task is read from the batch's commit, and the change goes on the task's own subject.
      const put = await api('PUT', `/tasks/${a!.id}`, { url: 'https://example.com/changed', name: 'changed' });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.data.url, 'https://example.com/changed');
      assert.equal(put.body.data.lane, 'commit-1', 'the rest of the task as the batch made it');
      assert.equal((await api('GET', `/tasks/${a!.id}`)).body.data.name, 'changed');
      assert.equal((await api('POST', `/tasks/${b!.id}/trigger`)).status, 202);
      assert.equal((await api('DELETE', `/tasks/${c!.id}`)).status, 204);
      assert.equal((await api('GET', `/tasks/${c!.id}`)).status, 404);
      assert.equal((await api('DELETE', `/tasks/${c!.id}`)).status, 404, 'deleted stays deleted');
      // An id that names a batch which does not hold it, and one of another organization, are not found.
      const forged = `${a!.id.slice(0, a!.id.lastIndexOf('u'))}u9z`;
      assert.equal((await api('PUT', `/tasks/${forged}`, { url: 'https://example.com/x' })).status, 404);
      const other = (await svc.createOrg()).api;
      assert.equal((await other('PUT', `/tasks/${b!.id}`, { url: 'https://example.com/x' })).status, 404);
      assert.equal((await other('DELETE', `/tasks/${b!.id}`)).status, 404);
      assert.equal((await api('DELETE', '/tasks?lane=commit-1')).body.data.cancelled, 49);
    } finally {
      await nats.close();
    }
  });

  test('a batch task that fails notifies as any task does (it is read from its batch\'s commit)', async () => {
    const target = await startTarget((r) => (r.path === '/fails' ? { status: 500 } : { status: 200 }));
    try {
      const { api: notifying } = await svc.createOrg();
      assert.equal((await notifying('PUT', '/organization', { notification_webhook_url: `${target.url}/notify`, notify_on_failure: true })).status, 200);
      const res = await notifying('POST', '/tasks/batch', { lane: 'notify-1', retry_attempts: 0, tasks: [{ url: `${target.url}/fails`, name: 'failing batch task' }] });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const sent = await eventually(() => target.received.find((r) => r.path === '/notify'), 20_000);
      const body = JSON.parse(sent.body);
      assert.equal(body.event, 'task.failed');
      assert.equal(body.source?.name ?? body.task?.name ?? body.data?.task?.name, 'failing batch task', sent.body);
    } finally {
      await target.close();
    }
  });

  // Its accept latency is measured by `npm run bench -- batch-accept`, not here.
  test('a 1000-task batch is accepted whole and a bulk cancel removes it', async () => {
    const tasks = Array.from({ length: 1000 }, (_, i) => ({ url: `http://127.0.0.1:9/t/${i}` }));
    const before = await taskCount();
    const res = await api('POST', '/tasks/batch', { lane: 'big', tasks, run_at: new Date(Date.now() + 86_400_000).toISOString() });
    assert.equal(res.status, 201);
    assert.equal(res.body.data.created, 1000);
    assert.equal(await taskCount(), before + 1000);
    const cancel = await api('DELETE', '/tasks?lane=big');
    assert.equal(cancel.body.data.cancelled, 1000);
    assert.equal(await taskCount(), before);
  });

  test('all or nothing: any invalid task rejects the whole batch', async () => {
    const before = await taskCount();
    const ok = (i: number) => ({ url: `http://host${i % 3}.example/x` });
    const cases: Array<[unknown, number, string]> = [
      [{ lane: 'x', tasks: [ok(0), ok(1), { url: 'not a url' }] }, 422, 'tasks[2].url'],
      [{ lane: 'x', tasks: [ok(0), { url: 'http://a.example', bogus: 1 }] }, 422, 'tasks[1].bogus'],
      [{ lane: 'x', tasks: [ok(0), { url: 'http://a.example', body: 'x'.repeat(262_145) }] }, 422, 'tasks[1].body'],
      [{ lane: 'x', tasks: [ok(0), { url: 'http://a.example', name: 'n'.repeat(256) }] }, 422, 'tasks[1].name'],
      [{ lane: 'x', tasks: [{ url: `http://a.example/${'p'.repeat(250)}` }] }, 422, 'tasks[0].url'],
      [{ lane: 'l'.repeat(256), tasks: [ok(0)] }, 422, 'lane'],
      [{ tasks: [ok(0)] }, 422, 'lane'],
      [{ lane: 'x', tasks: [] }, 422, 'tasks'],
      [{ lane: 'x', tasks: Array.from({ length: 1001 }, (_, i) => ok(i)) }, 422, 'tasks'],
      [{ lane: 'x', tasks: Array.from({ length: 51 }, (_, i) => ({ url: `http://h${i}.example/` })) }, 422, 'tasks'],
      [{ lane: 'x', tasks: Array.from({ length: 50 }, (_, i) => ({ url: `http://h${i}.example/` })), callback_url: 'http://cb.example/' }, 422, 'tasks'],
      [{ lane: 'x', tasks: [ok(0)], delay: '5m', run_at: new Date().toISOString() }, 422, 'run_at'],
      [{ lane: 'x', tasks: [ok(0)], retry_attempts: 11 }, 422, 'retry_attempts'],
    ];
    for (const [body, status, field] of cases) {
      const r = await api('POST', '/tasks/batch', body);
      assert.equal(r.status, status, `${field}: ${JSON.stringify(r.body).slice(0, 200)}`);
      assert.equal(r.body.error.field, field);
    }
    assert.equal(await taskCount(), before, 'no task was created by a rejected batch');
    // Exactly 50 hosts is fine.
    const fifty = await api('POST', '/tasks/batch', {
      lane: 'fifty', tasks: Array.from({ length: 50 }, (_, i) => ({ url: `http://h${i}.example/` })), delay: '1d',
    });
    assert.equal(fifty.status, 201);
  });

  test('Idempotency-Key on a batch replays the first answer and creates nothing more', async () => {
    const before = await taskCount();
    const body = { lane: 'idem', tasks: [{ url: 'http://a.example/1' }, { url: 'http://a.example/2' }], delay: '1d' };
    const a = await api('POST', '/tasks/batch', body, { 'Idempotency-Key': 'batch-key-1' });
    const b = await api('POST', '/tasks/batch', body, { 'Idempotency-Key': 'batch-key-1' });
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.deepEqual(b.body, a.body);
    assert.equal(b.headers.get('idempotent-replayed'), 'true');
    assert.equal(await taskCount(), before + 2);
  });
});
