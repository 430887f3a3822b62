import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { executionHelpers } from './support/executions.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BIG = 300 * 1024;

describe('executions API', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  // Built in before(): three finished executions of three tasks, oldest first, and a pending one.
  let ok1: any;
  let failed: any;
  let ok2: any;
  let pending: any;
  let between: string;

  const { execution, finished, create } = executionHelpers(() => api);
  const list = async (query: string) => {
    const res = await api('GET', `/executions${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  const ids = (rows: { id: string }[]) => rows.map((r) => r.id);

  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg()).api;
    other = (await svc.createOrg()).api;
    target = await startTarget((req) => {
      if (req.path === '/missing') return { status: 404, body: 'nope' };
      if (req.path === '/big') return { status: 200, body: 'x'.repeat(BIG) };
      return { status: 200, body: '{"ok":true}', headers: { 'Content-Type': 'application/json', 'X-Reply': 'yes' } };
    });
    const t1 = await create({ url: `${target.url}/one`, name: 'one', headers: { Authorization: 'Bearer hunter2', 'X-Plain': 'visible' }, body: { a: 1 } });
    ok1 = await finished(t1.last_execution_id);
    await sleep(30);
    between = new Date().toISOString();
    await sleep(30);
    const t2 = await create({ url: `${target.url}/missing`, name: 'two', retry_attempts: 0 });
    failed = await finished(t2.last_execution_id);
    await sleep(30);
    const t3 = await create({ url: `${target.url}/big`, name: 'three', method: 'GET' });
    ok2 = await finished(t3.last_execution_id);
    const t4 = await create({ url: `${target.url}/later`, name: 'four', delay: '1h' });
    pending = await execution(t4.last_execution_id);
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  test('a page read again shows what was projected since: a new task\'s execution, then its result', async () => {
    // An organization of its own, so the other tests' pages stay as they were built.
    const mine = (await svc.createOrg()).api;
    const page = async () => (await mine('GET', '/executions?limit=5')).body.data as Array<{ id: string; status: string; attempt: number }>;
    const first = await page();
    assert.deepEqual(await page(), first, 'nothing projected between two reads: the same page');
    const t = (await mine('POST', '/tasks', { url: `${target.url}/one`, name: 'fresh' })).body.data;
    // Read-your-writes: the create is in the very next page, pending or already finished.
    assert.ok((await page()).some((e) => e.id === t.last_execution_id));
    const row = await eventually(async () => (await page()).find((e) => e.id === t.last_execution_id && e.status === 'success'));
    assert.equal(row.attempt, 1);
  });

  test('lists newest first with the page fields', async () => {
    const body = await list('');
    assert.deepEqual(ids(body.data), [pending.id, ok2.id, failed.id, ok1.id]);
    assert.equal(body.has_more, false);
    assert.equal(body.limit, 50);
    assert.equal(body.offset, 0);
  });

  test('a list row has the spec fields and the task object', async () => {
    const row = (await list(`?task_id=${failed.task.id}`)).data[0];
    for (const f of ['id', 'status', 'status_code', 'error_message', 'attempt', 'duration_ms', 'scheduled_for', 'task']) assert.ok(f in row, f);
    assert.equal(row.id, failed.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.status_code, 404);
    assert.equal(typeof row.error_message, 'string');
    assert.equal(row.attempt, 1);
    assert.equal(typeof row.duration_ms, 'number');
    assert.ok(!Number.isNaN(Date.parse(row.scheduled_for)));
    assert.deepEqual(row.task, { id: failed.task.id, name: 'two', type: 'task', url: `${target.url}/missing` });
    const p = (await list('?status=pending')).data[0];
    assert.equal(p.attempt, 0);
    assert.equal(p.status_code, null);
    assert.equal(p.duration_ms, null);
  });

  test("a list row is the single execution's summary, key for key and in the same order", async () => {
    const rows = (await list('')).data as Array<Record<string, unknown>>;
    assert.equal(rows.length, 4);
    for (const row of rows) {
      const detail = (await api('GET', `/executions/${row.id}`)).body.data as Record<string, unknown>;
      const summary = Object.fromEntries(Object.keys(row).map((k) => [k, detail[k]]));
      assert.deepEqual(row, summary);
      assert.deepEqual(Object.keys(row), Object.keys(detail).slice(0, Object.keys(row).length));
      for (const k of ['scheduled_for', 'started_at', 'finished_at', 'created_at', 'updated_at']) {
        if (row[k] !== null) assert.match(String(row[k]), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, k);
      }
    }
  });

  test('filters by status and task_id', async () => {
    assert.deepEqual(ids((await list('?status=success')).data), [ok2.id, ok1.id]);
    assert.deepEqual(ids((await list('?status=failed')).data), [failed.id]);
    assert.deepEqual(ids((await list('?status=pending')).data), [pending.id]);
    assert.deepEqual((await list('?status=timeout')).data, []);
    assert.deepEqual(ids((await list(`?task_id=${ok1.task.id}`)).data), [ok1.id]);
    assert.deepEqual(ids((await list(`?task_id=${ok1.task.id}&status=failed`)).data), []);
    // An id that names no source of this organization is 404, naming the filter.
    const unknown = await api('GET', '/executions?task_id=tsk_unknown');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.field, 'task_id');
    const bad = await api('GET', '/executions?status=done');
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.field, 'status');
  });

  test('since and until take ISO timestamps and relative durations', async () => {
    assert.deepEqual(ids((await list(`?since=${encodeURIComponent(between)}&status=success`)).data), [ok2.id]);
    assert.deepEqual(ids((await list(`?until=${encodeURIComponent(between)}`)).data), [ok1.id]);
    assert.deepEqual(ids((await list(`?since=${encodeURIComponent(between)}&until=${encodeURIComponent(new Date().toISOString())}`)).data), [ok2.id, failed.id]);
    assert.equal((await list('?since=1h')).data.length, 4);
    assert.equal((await list('?since=1h&status=success')).data.length, 2);
    // The pending execution is scheduled an hour from now.
    assert.deepEqual(ids((await list('?until=1m')).data), []);
    assert.deepEqual(ids((await list('?since=7d&until=0s')).data), [ok2.id, failed.id, ok1.id]);
    const future = new Date(Date.now() + 2 * 3600_000).toISOString();
    assert.deepEqual((await list(`?since=${encodeURIComponent(future)}`)).data, []);
    for (const q of ['since=yesterday', 'until=12:00', 'since=5x']) {
      const res = await api('GET', `/executions?${q}`);
      assert.equal(res.status, 400, q);
      assert.equal(res.body.error.field, q.split('=')[0]);
    }
  });

  test('limit, offset and has_more page through the list', async () => {
    const p1 = await list('?limit=2');
    assert.deepEqual(ids(p1.data), [pending.id, ok2.id]);
    assert.equal(p1.has_more, true);
    assert.equal(p1.limit, 2);
    const p2 = await list('?limit=2&offset=2');
    assert.deepEqual(ids(p2.data), [failed.id, ok1.id]);
    assert.equal(p2.has_more, false);
    assert.equal(p2.offset, 2);
    const p3 = await list('?limit=3&offset=1');
    assert.deepEqual(ids(p3.data), [ok2.id, failed.id, ok1.id]);
    assert.equal(p3.has_more, false);
    assert.deepEqual((await list('?offset=10')).data, []);
    assert.equal((await list('?limit=1')).data.length, 1);
    assert.equal((await list('?limit=100')).data.length, 4);
    for (const [q, status] of [['limit=0', 422], ['limit=101', 422], ['limit=-1', 422], ['limit=abc', 400], ['limit=1.5', 400], ['offset=-1', 422], ['offset=x', 400]] as const) {
      const res = await api('GET', `/executions?${q}`);
      assert.equal(res.status, status, q);
      assert.equal(res.body.error.field, q.split('=')[0]);
    }
  });

  test('a single execution has attempts, the request as sent with secrets masked, and the response', async () => {
    const e = await execution(ok1.id);
    assert.equal(e.status, 'success');
    assert.equal(e.attempts.length, 1);
    const a = e.attempts[0];
    assert.deepEqual(Object.keys(a).sort(), ['attempt', 'duration_ms', 'error_message', 'finished_at', 'started_at', 'status', 'status_code']);
    assert.equal(a.attempt, 1);
    assert.equal(a.status, 'success');
    assert.equal(a.status_code, 200);
    assert.equal(a.error_message, null);
    assert.equal(e.request.method, 'POST');
    assert.equal(e.request.url, `${target.url}/one`);
    assert.equal(e.request.body, '{"a":1}');
    assert.equal(e.request.headers.Authorization, '***');
    assert.equal(e.request.headers['X-Plain'], 'visible');
    assert.ok(!JSON.stringify(e).includes('hunter2'));
    // The target did get the real header.
    assert.equal(target.received.find((r) => r.path === '/one')!.headers.authorization, 'Bearer hunter2');
    assert.equal(e.response_body, '{"ok":true}');
    assert.equal(e.response_truncated, false);
    assert.equal(e.response_headers['x-reply'], 'yes');
    assert.ok(Array.isArray(e.script_logs));
    assert.equal(e.task.type, 'task');

    const f = await execution(failed.id);
    assert.equal(f.attempts[0].status, 'failed');
    assert.equal(f.attempts[0].status_code, 404);
    assert.equal(f.response_body, 'nope');
    assert.equal((await api('GET', '/executions/exe_unknown')).status, 404);
  });

  test('a 300 KB response is stored truncated to 256 KB', async () => {
    const e = await execution(ok2.id);
    assert.equal(e.status, 'success');
    assert.equal(e.response_truncated, true);
    assert.equal(e.response_body.length, 262_144);
    assert.equal(e.request.method, 'GET');
    assert.equal(e.request.body, null);
  });

  test('task history: rows newest first, limited', async () => {
    const taskId = ok1.task.id;
    const triggered: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await api('POST', `/tasks/${taskId}/trigger`);
      assert.equal(res.status, 202);
      triggered.push(res.body.data.execution_id);
      await finished(res.body.data.execution_id);
    }
    const res = await api('GET', `/tasks/${taskId}/executions`);
    assert.equal(res.status, 200);
    assert.deepEqual(ids(res.body.data), [triggered[1], triggered[0], ok1.id]);
    const row = res.body.data[2];
    assert.deepEqual(Object.keys(row).sort(), ['attempt', 'duration_ms', 'finished_at', 'id', 'scheduled_for', 'started_at', 'status', 'status_code']);
    assert.equal(row.status, 'success');
    assert.equal(row.status_code, 200);
    assert.equal(row.attempt, 1);
    const limited = await api('GET', `/tasks/${taskId}/executions?limit=2`);
    assert.deepEqual(ids(limited.body.data), [triggered[1], triggered[0]]);
    assert.equal((await api('GET', `/tasks/${taskId}/executions?limit=0`)).status, 422);
    assert.equal((await api('GET', `/tasks/${taskId}/executions?limit=101`)).status, 422);
    assert.equal((await api('GET', `/tasks/${taskId}/executions?limit=abc`)).status, 400);
    assert.equal((await api('GET', '/tasks/tsk_unknown/executions')).status, 404);
  });

  test("another organization's executions are not visible", async () => {
    const res = await other('GET', `/executions/${ok1.id}`);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.field, null);
    // Another organization's task id in a filter is 404 naming the filter (CONTRACT.md, "Failure recovery").
    const filtered = await other('GET', `/executions?task_id=${ok1.task.id}`);
    assert.equal(filtered.status, 404);
    assert.equal(filtered.body.error.field, 'task_id');
    assert.deepEqual((await other('GET', '/executions')).body.data, []);
    assert.equal((await other('GET', `/tasks/${ok1.task.id}/executions`)).status, 404);
  });
});
