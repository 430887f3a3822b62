import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

describe('batches', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.001' });
    api = (await svc.createOrg()).api;
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
