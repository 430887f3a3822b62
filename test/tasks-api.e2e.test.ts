import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget } from './support/target.ts';

// delay and retry backoff are multiplied by this; run_at and timeout_ms are not.
const SCALE = 0.25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SPEC_FIELDS = [
  'url', 'name', 'method', 'headers', 'body', 'delay', 'run_at', 'timeout_ms', 'retry_attempts', 'callback_url', 'lane',
  'enabled', 'notify_on_failure', 'notify_on_recovery', 'expected_status_codes', 'expected_body_pattern', 'on_failure_url',
  'on_recovery_url', 'script', 'debounce', 'debounce_key',
];
const STATE_FIELDS = ['id', 'status', 'next_run_at', 'last_execution_id', 'created_at', 'updated_at'];

describe('tasks API', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let secret: string;
  let target: Awaited<ReturnType<typeof startTarget>>;
  // Requests to the shared target, by path.
  const hits = (path: string) => target.received.filter((r) => r.path === path);

  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    const org = await svc.createOrg();
    api = org.api;
    other = (await svc.createOrg()).api;
    secret = (await eventually(async () => (await api('GET', '/organization')).body?.data)).webhook_secret;
    target = await startTarget((req) => {
      if (req.path.startsWith('/slow')) return { status: 200, body: 'late', delayMs: 3000 };
      if (req.path.startsWith('/created')) return { status: 201, body: 'made' };
      if (req.path.startsWith('/pattern')) return { status: 200, body: 'all systems nominal' };
      return { status: 200, body: 'ok' };
    });
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  const execution = async (id: string) => (await api('GET', `/executions/${id}`)).body.data;
  const finished = (id: string, timeoutMs = 30_000) =>
    eventually(async () => {
      const e = await execution(id);
      return ['success', 'failed', 'timeout'].includes(e?.status) ? e : null;
    }, timeoutMs);
  const create = async (body: Record<string, unknown>) => {
    const res = await api('POST', '/tasks', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  };
  const assertError = (res: { status: number; body: any }, status: number, field: string | null) => {
    assert.equal(res.status, status, JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body), ['error']);
    assert.equal(typeof res.body.error.message, 'string');
    assert.ok(res.body.error.message.length > 0);
    assert.equal(res.body.error.field, field);
  };

  test('create returns 201 with every field, defaults and a generated name', async () => {
    const res = await api('POST', '/tasks', { url: `${target.url}/create-defaults`, enabled: false });
    assert.equal(res.status, 201);
    const t = res.body.data;
    for (const f of [...SPEC_FIELDS, ...STATE_FIELDS]) assert.ok(f in t, `missing ${f}`);
    assert.match(t.id, /^tsk_/);
    assert.equal(t.method, 'POST');
    assert.equal(t.timeout_ms, 30000);
    assert.equal(t.retry_attempts, 5);
    assert.equal(t.enabled, false);
    assert.equal(typeof t.name, 'string');
    assert.ok(t.name.length > 0);
    assert.equal(t.status, 'pending');
    assert.match(t.last_execution_id, /^exe_/);
    assert.ok(!Number.isNaN(Date.parse(t.next_run_at)));
    assert.ok(!Number.isNaN(Date.parse(t.created_at)));
    assert.ok(!Number.isNaN(Date.parse(t.updated_at)));
    assert.equal(t.org_id, undefined);
    assert.equal(t.pending_execution, undefined);

    const enabled = await create({ url: `${target.url}/create-defaults-2` });
    assert.equal(enabled.enabled, true);

    const full = await create({
      url: `${target.url}/create-full`, name: 'full', method: 'PUT', headers: { 'X-A': '1' }, body: 'text', delay: '1h',
      timeout_ms: 1000, retry_attempts: 0, callback_url: `${target.url}/cb`, lane: 'l1', notify_on_failure: false,
      notify_on_recovery: true, expected_status_codes: '200,201', expected_body_pattern: 'ok', on_failure_url: `${target.url}/f`,
      on_recovery_url: `${target.url}/r`,
    });
    assert.equal(full.name, 'full');
    assert.equal(full.method, 'PUT');
    assert.deepEqual(full.headers, { 'X-A': '1' });
    assert.equal(full.body, 'text');
    assert.equal(full.delay, '1h');
    assert.equal(full.timeout_ms, 1000);
    assert.equal(full.retry_attempts, 0);
    assert.equal(full.lane, 'l1');
    assert.equal(full.notify_on_failure, false);
    assert.equal(full.expected_status_codes, '200,201');
    // 1 h × 0.25 = 15 min from now.
    const due = Date.parse(full.next_run_at) - Date.now();
    assert.ok(due > 14 * 60_000 && due < 16 * 60_000, `due in ${due} ms`);
  });

  test('list is newest first; get returns one task', async () => {
    const a = await create({ url: `${target.url}/list-a`, enabled: false });
    const b = await create({ url: `${target.url}/list-b`, enabled: false });
    const list = await api('GET', '/tasks');
    assert.equal(list.status, 200);
    const ids = list.body.data.map((t: { id: string }) => t.id);
    assert.ok(ids.indexOf(b.id) < ids.indexOf(a.id));
    assert.ok(ids.indexOf(a.id) >= 0);
    const got = await api('GET', `/tasks/${a.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.data.id, a.id);
    assert.equal(got.body.data.url, `${target.url}/list-a`);
    assertError(await api('GET', '/tasks/tsk_doesnotexist'), 404, null);
  });

  test('PUT changes only the fields sent; unknown id is 404', async () => {
    const t = await create({ url: `${target.url}/put`, name: 'before', headers: { 'X-Keep': 'y' }, timeout_ms: 2000, enabled: false });
    const res = await api('PUT', `/tasks/${t.id}`, { name: 'after', retry_attempts: 2 });
    assert.equal(res.status, 200);
    const u = res.body.data;
    assert.equal(u.name, 'after');
    assert.equal(u.retry_attempts, 2);
    assert.equal(u.timeout_ms, 2000);
    assert.deepEqual(u.headers, { 'X-Keep': 'y' });
    assert.equal(u.url, t.url);
    assert.equal(u.enabled, false);
    assert.equal(u.created_at, t.created_at);
    assert.ok(Date.parse(u.updated_at) >= Date.parse(t.updated_at));
    assert.equal((await api('GET', `/tasks/${t.id}`)).body.data.name, 'after');
    assertError(await api('PUT', '/tasks/tsk_doesnotexist', { name: 'x' }), 404, null);
  });

  test('DELETE gives 204, then the task and its executions are gone', async () => {
    const t = await create({ url: `${target.url}/delete` });
    await finished(t.last_execution_id);
    assert.equal((await api('GET', `/executions?task_id=${t.id}`)).body.data.length, 1);
    const del = await api('DELETE', `/tasks/${t.id}`);
    assert.equal(del.status, 204);
    assert.equal(del.body, null);
    assertError(await api('GET', `/tasks/${t.id}`), 404, null);
    // Its executions went with it: its id names nothing of this organization now (404, the filter named).
    assertError(await api('GET', `/executions?task_id=${t.id}`), 404, 'task_id');
    assert.equal((await api('GET', `/executions/${t.last_execution_id}`)).status, 404);
    assert.equal((await api('DELETE', `/tasks/${t.id}`)).status, 404);
  });

  test('trigger queues a new execution that runs', async () => {
    const t = await create({ url: `${target.url}/trigger`, enabled: false });
    const res = await api('POST', `/tasks/${t.id}/trigger`);
    assert.equal(res.status, 202);
    assert.deepEqual(Object.keys(res.body).sort(), ['data', 'message']);
    assert.equal(typeof res.body.message, 'string');
    assert.deepEqual(Object.keys(res.body.data).sort(), ['execution_id', 'status']);
    assert.equal(res.body.data.status, 'pending');
    const id = res.body.data.execution_id;
    assert.match(id, /^exe_/);
    assert.notEqual(id, t.last_execution_id);
    const exe = await finished(id);
    assert.equal(exe.status, 'success');
    assert.equal(exe.task.id, t.id);
    assert.equal(hits('/trigger').length, 1);
    assert.equal(hits('/trigger')[0]!.headers['x-jetcron-execution-id'], id);
    // The task's own (disabled) execution stayed put.
    assert.equal((await execution(t.last_execution_id)).status, 'pending');
  });

  const assertCallback = (cb: { method: string; headers: Record<string, unknown>; body: string }, taskId: string, exe: any) => {
    assert.equal(cb.method, 'POST');
    const payload = JSON.parse(cb.body);
    assert.deepEqual(Object.keys(payload).sort(), [
      'attempt', 'duration_ms', 'event', 'execution_id', 'finished_at', 'started_at', 'status', 'status_code', 'task_id',
    ]);
    assert.equal(payload.event, 'execution.completed');
    assert.equal(payload.task_id, taskId);
    assert.equal(payload.execution_id, exe.id);
    assert.equal(payload.status, exe.status);
    assert.equal(payload.status_code, exe.status_code);
    assert.equal(payload.attempt, 1);
    assert.equal(typeof payload.duration_ms, 'number');
    assert.ok(!Number.isNaN(Date.parse(payload.started_at)));
    assert.ok(Date.parse(payload.finished_at) >= Date.parse(payload.started_at));
    assert.equal(cb.headers['x-jetcron-execution-id'], exe.id);
    assert.ok(signedWith(cb, secret, exe.id), 'callback signature');
  };

  test('a task-level callback_url gets the signed execution.completed callback', async () => {
    const t = await create({ url: `${target.url}/cb-task-run`, callback_url: `${target.url}/cb-task` });
    const exe = await finished(t.last_execution_id);
    const cb = await eventually(async () => hits('/cb-task')[0]);
    assertCallback(cb, t.id, exe);
    assert.ok(cb.at >= hits('/cb-task-run')[0]!.at);
  });

  test('trigger with {callback_url} sends the callback there, not to the task callback', async () => {
    const t = await create({ url: `${target.url}/cb-push-run`, callback_url: `${target.url}/cb-push-task`, enabled: false });
    const res = await api('POST', `/tasks/${t.id}/trigger`, { callback_url: `${target.url}/cb-push-exe` });
    assert.equal(res.status, 202);
    const exe = await finished(res.body.data.execution_id);
    const cb = await eventually(async () => hits('/cb-push-exe')[0]);
    assertCallback(cb, t.id, exe);
    // A later run without the override calls back the task's URL: once that callback came,
    // the first run's would have too, had it gone there as well.
    const next = await api('POST', `/tasks/${t.id}/trigger`);
    assert.equal(next.status, 202);
    await finished(next.body.data.execution_id);
    const taskCb = await eventually(async () => hits('/cb-push-task')[0]);
    assert.equal(JSON.parse(taskCb.body).execution_id, next.body.data.execution_id);
    assert.equal(hits('/cb-push-task').length, 1);
    assert.equal(hits('/cb-push-exe').length, 1);
  });

  describe('validation', () => {
    const url = 'http://127.0.0.1:9/never';
    const cases: [string, unknown, number, string | null][] = [
      ['missing url', { name: 'x' }, 422, 'url'],
      ['bad method', { url, method: 'FETCH' }, 422, 'method'],
      ['timeout_ms 999', { url, timeout_ms: 999 }, 422, 'timeout_ms'],
      ['timeout_ms 300001', { url, timeout_ms: 300001 }, 422, 'timeout_ms'],
      ['retry_attempts 11', { url, retry_attempts: 11 }, 422, 'retry_attempts'],
      ['retry_attempts -1', { url, retry_attempts: -1 }, 422, 'retry_attempts'],
      ['delay and run_at', { url, delay: '5s', run_at: new Date(Date.now() + 60_000).toISOString() }, 422, 'run_at'],
      ['delay 5x', { url, delay: '5x' }, 422, 'delay'],
      ['body over 256 KB', { url, body: 'a'.repeat(262_145) }, 422, 'body'],
      ['JSON body over 256 KB', { url, body: { k: 'a'.repeat(262_140) } }, 422, 'body'],
      ['unknown field', { url, retry_attemps: 3 }, 422, 'retry_attemps'],
      ['debounce without debounce_key', { url, debounce: '5s', lane: 'l' }, 422, 'debounce_key'],
      ['debounce without lane', { url, debounce: '5s', debounce_key: 'k' }, 422, 'lane'],
      ['debounce_key without debounce', { url, debounce_key: 'k', lane: 'l' }, 422, 'debounce'],
      ['script on free', { url, script: 'function on_response(res, task) end' }, 403, 'script'],
      ['url not http', { url: 'ftp://example.com/x' }, 422, 'url'],
      ['timeout_ms as string', { url, timeout_ms: '1000' }, 422, 'timeout_ms'],
      ['header value with a line break', { url, headers: { 'X-A': 'a\r\nX-Injected: 1' } }, 422, 'headers.X-A'],
      ['Transfer-Encoding header', { url, headers: { 'Transfer-Encoding': 'chunked' } }, 422, 'headers.Transfer-Encoding'],
      ['Content-Length header', { url, headers: { 'content-length': '5' } }, 422, 'headers.content-length'],
      ['X-Jetcron-* header', { url, headers: { 'X-Jetcron-Signature': 'sha256=0' } }, 422, 'headers.X-Jetcron-Signature'],
      ['bad header name', { url, headers: { 'X A': '1' } }, 422, 'headers'],
    ];
    for (const [name, body, status, field] of cases) {
      test(name, async () => {
        assertError(await api('POST', '/tasks', body), status, field);
      });
    }

    test('a body of exactly 262144 bytes (UTF-8) is accepted', async () => {
      assert.equal((await api('POST', '/tasks', { url, body: 'a'.repeat(262_144), enabled: false })).status, 201);
      const t = await create({ url, body: 'a'.repeat(262_142) + 'é', enabled: false });
      assert.equal(t.body.length, 262_143);
      assertError(await api('POST', '/tasks', { url, body: 'a'.repeat(262_143) + 'é', enabled: false }), 422, 'body');
    });

    test('the same rules apply to PUT', async () => {
      const t = await create({ url, enabled: false });
      assertError(await api('PUT', `/tasks/${t.id}`, { retry_attemps: 1 }), 422, 'retry_attemps');
      assertError(await api('PUT', `/tasks/${t.id}`, { timeout_ms: 999 }), 422, 'timeout_ms');
      assertError(await api('PUT', `/tasks/${t.id}`, { body: 'b'.repeat(262_145) }), 422, 'body');
      assertError(await api('PUT', `/tasks/${t.id}`, { script: 'x = 1' }), 403, 'script');
      assertError(await api('PUT', `/tasks/${t.id}`, { debounce: '5s' }), 422, 'debounce_key');
      assertError(await api('PUT', `/tasks/${t.id}`, { headers: { Connection: 'close' } }), 422, 'headers.Connection');
      assert.equal((await api('GET', `/tasks/${t.id}`)).body.data.retry_attempts, 5);
    });

    test('a body that is not JSON is 400', async () => {
      assertError(await api('POST', '/tasks', '{"url": '), 400, null);
    });
    test('a JSON array body is 400', async () => {
      assertError(await api('POST', '/tasks', [{ url }]), 400, null);
    });
    test('a JSON scalar body is 400', async () => {
      assertError(await api('POST', '/tasks', '"x"'), 400, null);
      assertError(await api('POST', '/tasks', 'null'), 400, null);
    });
    test('Content-Type text/plain is 400', async () => {
      assertError(await api('POST', '/tasks', JSON.stringify({ url }), { 'Content-Type': 'text/plain' }), 400, null);
    });
    test('no body at all is 400', async () => {
      assertError(await api('POST', '/tasks'), 400, null);
    });
    test('a request body over 1 MB is 413', async () => {
      assertError(await api('POST', '/tasks', { url, body: 'a'.repeat(1_100_000) }), 413, null);
    });
    test('trigger rejects unknown fields and bad callback URLs', async () => {
      const t = await create({ url, enabled: false });
      assertError(await api('POST', `/tasks/${t.id}/trigger`, { callback: 'x' }), 422, 'callback');
      assertError(await api('POST', `/tasks/${t.id}/trigger`, { callback_url: 'nope' }), 422, 'callback_url');
    });
  });

  test("another organization's task is 404 on GET, PUT, DELETE and trigger", async () => {
    const t = await create({ url: `${target.url}/foreign`, enabled: false });
    assertError(await other('GET', `/tasks/${t.id}`), 404, null);
    assertError(await other('PUT', `/tasks/${t.id}`, { name: 'stolen' }), 404, null);
    assertError(await other('DELETE', `/tasks/${t.id}`), 404, null);
    assertError(await other('POST', `/tasks/${t.id}/trigger`), 404, null);
    assertError(await other('GET', `/tasks/${t.id}/executions`), 404, null);
    assert.ok(!(await other('GET', '/tasks')).body.data.some((x: { id: string }) => x.id === t.id));
    const still = (await api('GET', `/tasks/${t.id}`)).body.data;
    assert.equal(still.name, t.name);
    // The refused trigger made no execution: the task still has only its first, pending.
    const exes = (await api('GET', `/tasks/${t.id}/executions`)).body.data;
    assert.deepEqual(exes.map((x: { status: string }) => x.status), ['pending']);
    assert.equal(hits('/foreign').length, 0);
  });

  test('a delayed task runs after its (scaled) delay and not before', async () => {
    const t0 = Date.now();
    const t = await create({ url: `${target.url}/delayed`, delay: '2s' });
    // 2 s × 0.25 = 500 ms. Never early; how late depends on the machine, so it is not checked.
    const exe = await finished(t.last_execution_id, 30_000);
    assert.equal(exe.status, 'success');
    assert.equal(hits('/delayed').length, 1);
    const ran = hits('/delayed')[0]!.at - t0;
    assert.ok(ran >= 450, `ran after ${ran} ms, before its delay`);
  });

  test('run_at runs on the wall clock, unscaled', async () => {
    const runAt = Date.now() + 1500;
    const t = await create({ url: `${target.url}/run-at`, run_at: new Date(runAt).toISOString() });
    assert.equal(Date.parse(t.next_run_at), runAt);
    await finished(t.last_execution_id, 30_000);
    const diff = hits('/run-at')[0]!.at - runAt;
    // Never early (how late depends on the machine, so it is not checked). A scaled run_at
    // (× 0.25 here) would come ~1.1 s early, so the lower bound is the real check.
    assert.ok(diff >= -50, `${-diff} ms early`);
  });


  test('a disabled task does not run until it is enabled', async () => {
    // One lane puts both tasks in one partition, whose owner reads them in order.
    const t = await create({ url: `${target.url}/disabled`, enabled: false, lane: 'disabled-check' });
    // Once a task created after this one has run, its owner holds this one, parked (a disabled task does not hold its lane).
    const after = await create({ url: `${target.url}/after-disabled`, lane: 'disabled-check' });
    await finished(after.last_execution_id);
    assert.equal(hits('/disabled').length, 0);
    assert.equal((await execution(t.last_execution_id)).status, 'pending');
    const res = await api('PUT', `/tasks/${t.id}`, { enabled: true });
    assert.equal(res.status, 200);
    assert.equal(res.body.data.enabled, true);
    const exe = await finished(t.last_execution_id, 30_000);
    assert.equal(exe.status, 'success');
    assert.equal(hits('/disabled').length, 1);
  });

  test('expected_status_codes "201": a 200 fails, a 201 succeeds', async () => {
    const a = await create({ url: `${target.url}/plain`, expected_status_codes: '201', retry_attempts: 0 });
    const b = await create({ url: `${target.url}/created`, expected_status_codes: '201', retry_attempts: 0 });
    const [ea, eb] = await Promise.all([finished(a.last_execution_id), finished(b.last_execution_id)]);
    assert.equal(ea.status, 'failed');
    assert.equal(ea.status_code, 200);
    assert.match(ea.error_message, /201/);
    assert.equal(eb.status, 'success');
    assert.equal(eb.status_code, 201);
    assert.equal((await api('GET', `/tasks/${a.id}`)).body.data.status, 'failed');
    assert.equal((await api('GET', `/tasks/${b.id}`)).body.data.status, 'success');
  });

  test('expected_body_pattern is a substring the body must contain', async () => {
    const ok = await create({ url: `${target.url}/pattern-ok`, expected_body_pattern: 'systems nominal', retry_attempts: 0 });
    const bad = await create({ url: `${target.url}/pattern-bad`, expected_body_pattern: 'systems.nominal', retry_attempts: 0 });
    const [eo, eb] = await Promise.all([finished(ok.last_execution_id), finished(bad.last_execution_id)]);
    assert.equal(eo.status, 'success');
    assert.equal(eb.status, 'failed');
    assert.equal(eb.status_code, 200);
    assert.match(eb.error_message, /systems\.nominal/);
  });

  test('timeout_ms 1000 against a 3 s target ends in timeout', async () => {
    const t = await create({ url: `${target.url}/slow`, timeout_ms: 1000, retry_attempts: 0 });
    const exe = await finished(t.last_execution_id, 30_000);
    assert.equal(exe.status, 'timeout');
    assert.equal(exe.status_code, null);
    assert.match(exe.error_message, /time(d)? ?out/i);
    // The target answers after 3 s; the attempt gave up at its 1 s timeout (not before),
    // which the status above says: it did not wait for the answer.
    assert.ok(exe.duration_ms >= 950, `gave up after ${exe.duration_ms} ms, before its timeout`);
    assert.equal((await api('GET', `/tasks/${t.id}`)).body.data.status, 'timeout');
  });
});

test('a run_at 40 days ahead waits quietly: its timer is not re-armed every millisecond', async () => {
  // setTimeout past 2^31-1 ms fires at once with a TimeoutOverflowWarning; the timer
  // heap then spun a core re-arming the same far timer. A service of its own, so the
  // far timer is the first in its heap.
  const svc = await startTestService();
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    const { api } = await svc.createOrg();
    const res = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/far', run_at: new Date(Date.now() + 40 * 86_400_000).toISOString() });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await sleep(1000);
    assert.equal((await api('GET', `/executions/${res.body.data.last_execution_id}`)).body.data.status, 'pending');
    assert.deepEqual(warnings.filter((w) => w === 'TimeoutOverflowWarning'), []);
  } finally {
    process.off('warning', onWarning);
    await svc.stop();
  }
});
