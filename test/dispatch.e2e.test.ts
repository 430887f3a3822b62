import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget } from './support/target.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { lastTaskEvent } from '../src/commands/task/load.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { encodeJson } from '../src/lib/json.ts';
import { connectNats } from '../src/nats/connection.ts';
import { readExecutionEvents } from './support/jetcron-process.ts';
import { taskAttemptJob } from '../src/commands/execution/task-jobs.ts';

// 1 service minute = 6 ms: the retry schedule (2, 4.5, 8 … minutes) runs in well under a second.
const SCALE = 0.0001;

describe('dispatch of one-time tasks', () => {
  let svc: TestService;
  let api: Api;
  let secret: string;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    const org = await svc.createOrg();
    api = org.api;
    secret = (await api('GET', '/organization')).body.data.webhook_secret;
  });
  after(() => svc.stop());

  const execution = async (id: string) => (await api('GET', `/executions/${id}`)).body.data;
  const finished = (id: string, status = ['success', 'failed', 'timeout']) =>
    eventually(async () => {
      const e = await execution(id);
      return status.includes(e.status) ? e : null;
    });

  test('an immediate task runs at once, signed, with its headers and JSON body', async () => {
    const target = await startTarget();
    try {
      const res = await api('POST', '/tasks', { url: `${target.url}/hook?x=1`, headers: { 'X-Custom': 'yes' }, body: { hello: 'world' } });
      assert.equal(res.status, 201);
      const task = res.body.data;
      const exe = await finished(task.last_execution_id);
      assert.equal(exe.status, 'success');
      assert.equal(exe.status_code, 200);
      assert.equal(target.received.length, 1);
      const got = target.received[0]!;
      assert.equal(got.method, 'POST');
      assert.equal(got.path, '/hook?x=1');
      assert.equal(got.headers['x-custom'], 'yes');
      assert.equal(got.headers['content-type'], 'application/json');
      assert.equal(got.body, '{"hello":"world"}');
      assert.equal(got.headers['x-jetcron-task-id'], task.id);
      assert.equal(got.headers['x-jetcron-execution-id'], exe.id);
      assert.ok(signedWith(got, secret, exe.id));
      assert.equal(exe.response_body, 'ok');
      assert.equal(exe.attempts.length, 1);
      assert.equal(exe.request.headers['X-Custom'], 'yes');
    } finally {
      await target.close();
    }
  });

  test('5xx is retried on the scaled schedule with the same execution id, then fails for good', async () => {
    const target = await startTarget(() => ({ status: 503, body: 'down' }));
    try {
      const task = (await api('POST', '/tasks', { url: target.url, retry_attempts: 3 })).body.data;
      const exe = await finished(task.last_execution_id, ['failed']);
      assert.equal(exe.attempt, 4);
      assert.equal(exe.attempts.length, 4);
      assert.equal(target.received.length, 4);
      const ids = new Set(target.received.map((r) => r.headers['x-jetcron-execution-id']));
      assert.deepEqual([...ids], [exe.id]);
      // Gaps follow (n+1)²/2 minutes × scale: 12, 27, 48 ms.
      const gaps = target.received.slice(1).map((r, i) => r.at - target.received[i]!.at);
      for (const [i, expectedMin] of [2, 4.5, 8].entries()) assert.ok(gaps[i]! >= expectedMin * 60_000 * SCALE - 5, `gap ${i} = ${gaps[i]}`);
      const t = (await api('GET', `/tasks/${task.id}`)).body.data;
      assert.equal(t.status, 'failed');
    } finally {
      await target.close();
    }
  });

  test('a 4xx fails at once without retry; a later success of a retried run succeeds', async () => {
    const target = await startTarget((req) => (req.path === '/bad' ? { status: 404 } : { status: 200 }));
    try {
      const bad = (await api('POST', '/tasks', { url: `${target.url}/bad` })).body.data;
      const exe = await finished(bad.last_execution_id);
      assert.equal(exe.status, 'failed');
      assert.equal(exe.status_code, 404);
      // Final after one attempt: there is no retry to wait for.
      assert.equal(exe.attempt, 1);
      assert.equal(target.received.filter((r) => r.path === '/bad').length, 1);

      let calls = 0;
      target.setResponder((req) => (req.path === '/flaky' ? { status: ++calls < 3 ? 500 : 200 } : { status: 200 }));
      const flaky = (await api('POST', '/tasks', { url: `${target.url}/flaky` })).body.data;
      const ok = await finished(flaky.last_execution_id, ['success']);
      assert.equal(ok.attempt, 3);
      assert.deepEqual(ok.attempts.map((a: { status: string }) => a.status), ['failed', 'failed', 'success']);
    } finally {
      await target.close();
    }
  });

  test('updating a delayed task changes what its pending run sends, callback included', async () => {
    const target = await startTarget();
    try {
      // 500 service minutes = 3 s at this scale: time to update before it runs, also on a busy machine.
      const task = (await api('POST', '/tasks', { url: `${target.url}/old`, delay: '500m', callback_url: `${target.url}/cb-old` })).body.data;
      const put = await api('PUT', `/tasks/${task.id}`, { url: `${target.url}/new`, callback_url: `${target.url}/cb-new`, body: 'v2' });
      assert.equal(put.status, 200);
      await finished(task.last_execution_id);
      await eventually(async () => target.received.some((r) => r.path === '/cb-new'));
      const paths = target.received.map((r) => r.path);
      assert.deepEqual(paths.filter((p) => p !== '/cb-new'), ['/new']);
      assert.equal(target.received[0]!.body, 'v2');
      const cb = JSON.parse(target.received.find((r) => r.path === '/cb-new')!.body);
      assert.equal(cb.event, 'execution.completed');
      assert.equal(cb.execution_id, task.last_execution_id);
    } finally {
      await target.close();
    }
  });

  test('a deleted delayed task never runs', async () => {
    const target = await startTarget();
    try {
      // 500 service minutes = 3 s: the delete surely lands before it is due.
      const task = (await api('POST', '/tasks', { url: `${target.url}/deleted`, delay: '500m' })).body.data;
      assert.equal((await api('DELETE', `/tasks/${task.id}`)).status, 204);
      // A witness with the same delay, created after the delete, is due after the deleted
      // one would have been: once it ran, the deleted one's time has passed.
      const witness = (await api('POST', '/tasks', { url: `${target.url}/witness`, delay: '500m' })).body.data;
      await finished(witness.last_execution_id);
      assert.deepEqual(target.received.map((r) => r.path), ['/witness']);
      assert.equal((await api('GET', `/executions/${task.last_execution_id}`)).status, 404);
    } finally {
      await target.close();
    }
  });

  test('an attempt in flight is running, and a stop lets it finish and be recorded', async () => {
    const target = await startTarget(() => ({ status: 200, delayMs: 1500 }));
    try {
      const task = (await api('POST', '/tasks', { url: target.url, retry_attempts: 0 })).body.data;
      await eventually(async () => (await execution(task.last_execution_id)).status === 'running');
      assert.equal((await api('GET', `/tasks/${task.id}`)).body.data.status, 'running');
      await svc.stopService();
      await svc.startService();
      const exe = await finished(task.last_execution_id);
      assert.equal(exe.status, 'success');
      assert.equal(target.received.length, 1);
    } finally {
      await target.close();
    }
  });
  // DISPATCH's own guard: with partition owners no task job goes through DISPATCH.
});

describe('outbound SSRF guard (default settings)', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ JETCRON_ALLOW_PRIVATE_TARGETS: '0' });
  });
  after(() => svc.stop());

  test('a loopback target is refused as a failed attempt with a clear message, and never called', async () => {
    const target = await startTarget();
    try {
      const { api } = await svc.createOrg();
      const task = (await api('POST', '/tasks', { url: `${target.url}/internal` })).body.data;
      const exe = await eventually(async () => {
        const e = (await api('GET', `/executions/${task.last_execution_id}`)).body.data;
        return e.status === 'failed' ? e : null;
      });
      assert.match(exe.error_message, /refused/);
      assert.equal(exe.attempt, 1, 'a refused target is not retried');
      assert.equal(target.received.length, 0);
    } finally {
      await target.close();
    }
  });
});

describe('completion callbacks', () => {
  let svc: TestService;
  let api: Api;
  // 5 s → 50 ms and 20 s → 200 ms.
  const CB_SCALE = 0.01;
  let conn: Awaited<ReturnType<typeof connectNats>>;
  let orgId: string;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(CB_SCALE) });
    const org = await svc.createOrg();
    api = org.api;
    orgId = org.orgId;
    conn = await connectNats(svc.natsUrl, 'test callbacks');
  });
  after(async () => {
    await conn.close();
    await svc.stop();
  });

  /** Waits for the execution's last callback try to say there is no next one (success, or given up). */
  const callbackDone = (executionId: string) =>
    eventually(async () => {
      const last = (await readExecutionEvents(conn, orgId)).filter((e) => e.event.data.execution_id === executionId).pop()?.event;
      return last?.type === 'CallbackAttempted' && last.data.next_attempt_at === null;
    }, 30_000);

  test('a failing callback is retried 5 s then 20 s later (scaled), 3 tries in all, signed each time', async () => {
    const target = await startTarget((req) => (req.path === '/cb' ? { status: 500 } : { status: 200 }));
    try {
      const task = (await api('POST', '/tasks', { url: `${target.url}/run`, callback_url: `${target.url}/cb` })).body.data;
      await callbackDone(task.last_execution_id);
      const tries = target.received.filter((r) => r.path === '/cb');
      assert.equal(tries.length, 3, 'three tries, the last one recorded as the last');
      // Never early; how late depends on the machine, so it is not checked.
      const gaps = [tries[1]!.at - tries[0]!.at, tries[2]!.at - tries[1]!.at];
      assert.ok(gaps[0]! >= 5000 * CB_SCALE - 5, `first gap ${gaps[0]}`);
      assert.ok(gaps[1]! >= 20000 * CB_SCALE - 5, `second gap ${gaps[1]}`);
      for (const t of tries) {
        assert.equal(t.headers['x-jetcron-execution-id'], task.last_execution_id);
        assert.match(String(t.headers['x-jetcron-signature']), /^sha256=[0-9a-f]{64}$/);
        assert.equal(t.body, tries[0]!.body, 'every try sends the same payload');
      }
      const payload = JSON.parse(tries[0]!.body);
      assert.equal(payload.status, 'success');
      assert.equal(payload.task_id, task.id);
    } finally {
      await target.close();
    }
  });

  test('a callback that succeeds on the second try is not tried again', async () => {
    let n = 0;
    const target = await startTarget((req) => (req.path === '/cb2' ? { status: ++n === 1 ? 503 : 200 } : { status: 200 }));
    try {
      const task = (await api('POST', '/tasks', { url: `${target.url}/run2`, callback_url: `${target.url}/cb2` })).body.data;
      await callbackDone(task.last_execution_id);
      assert.equal(target.received.filter((r) => r.path === '/cb2').length, 2);
    } finally {
      await target.close();
    }
  });
});
