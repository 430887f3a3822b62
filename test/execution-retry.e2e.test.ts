/** `POST /executions/{id}/retry` for every kind of execution (issue 36, stage 2). */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget } from './support/target.ts';
import { executionHelpers } from './support/executions.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';

describe('retry one execution', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let secret: string;
  let target: Awaited<ReturnType<typeof startTarget>>;
  // Paths answered 410 until the test lets them succeed.
  const failing = new Set<string>();
  // Paths held open until their promise resolves (a lane's order).
  const held = new Map<string, Promise<unknown>>();
  const { execution, finished, create } = executionHelpers(() => api);
  const retry = (id: string, as: Api = api) => as('POST', `/executions/${id}/retry`);
  const received = (pathPrefix: string) => target.received.filter((r) => r.path.startsWith(pathPrefix));

  before(async () => {
    svc = await startTestService();
    const created = await svc.createOrg('pro');
    api = created.api;
    other = (await svc.createOrg()).api;
    secret = (await api('GET', '/organization')).body.data.webhook_secret;
    target = await startTarget((req) => {
      const path = req.path.split('?')[0]!;
      const until = held.get(path);
      // 4xx, not 5xx: three 5xx in a row would block the host for the organization (per-host backoff).
      if (failing.has(path)) return { status: 410, body: 'gone' };
      return { status: 200, body: 'ok', ...(until ? { until } : {}) };
    });
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  test('a failed task is retried as the task is now: its current url and headers, signed afresh, linked both ways, no longer dead', async () => {
    failing.add('/task/v1');
    const task = await create({ url: `${target.url}/task/v1`, name: 'retry me', headers: { 'X-Version': '1' }, retry_attempts: 0 });
    const first = await finished(task.last_execution_id);
    assert.equal(first.status, 'failed');
    assert.equal((await api('PUT', `/tasks/${task.id}`, { url: `${target.url}/task/v2`, headers: { 'X-Version': '2' } })).status, 200);
    const res = await retry(first.id);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.data.status, 'pending');
    assert.equal(res.body.data.retry_of, first.id);
    const again = await finished(res.body.data.execution_id);
    assert.equal(again.status, 'success');
    assert.equal(again.attempt, 1);
    assert.equal(again.retry_of, first.id);
    const got = received('/task/v2');
    assert.equal(got.length, 1);
    assert.equal(got[0]!.headers['x-version'], '2');
    assert.equal(got[0]!.headers['x-jetcron-execution-id'], again.id);
    assert.ok(signedWith(got[0]!, secret, again.id), 'signed for the new execution');
    const old = await eventually(async () => {
      const e = await execution(first.id);
      return e.retried_by ? e : null;
    });
    assert.equal(old.retried_by, again.id);
    const dead = (await api('GET', `/executions?dead=true&task_id=${task.id}`)).body.data;
    assert.deepEqual(dead, [], 'a retried execution is no dead letter');
  });

  test("an execution triggered with a push-level callback: its retry's outcome goes to that callback too", async () => {
    failing.add('/task/pushed');
    const task = await create({ url: `${target.url}/task/pushed`, name: 'pushed', retry_attempts: 0, delay: '1d' });
    const triggered = await api('POST', `/tasks/${task.id}/trigger`, { callback_url: `${target.url}/cb/push` });
    assert.equal(triggered.status, 202, JSON.stringify(triggered.body));
    const first = await finished(triggered.body.data.execution_id ?? triggered.body.data.id);
    assert.equal(first.status, 'failed');
    const calledBack = (id: string) => eventually(() => received('/cb/push').find((r) => JSON.parse(r.body).execution_id === id), 30_000);
    await calledBack(first.id);
    failing.delete('/task/pushed');
    const res = await retry(first.id);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const again = await finished(res.body.data.execution_id);
    assert.equal(again.status, 'success');
    const payload = JSON.parse((await calledBack(again.id))!.body);
    assert.deepEqual([payload.event, payload.status], ['execution.completed', 'success']);
  });

  test('a schedule tick is retried with the schedule as it is now, signed afresh', async () => {
    failing.add('/tick/v1');
    const s = (await api('POST', '/schedules', { name: 'nightly', cron: '0 3 * * *', url: `${target.url}/tick/v1`, headers: { 'X-Version': '1' }, retry_attempts: 0 })).body.data;
    const fired = await api('POST', `/schedules/${s.id}/trigger`, {});
    const first = await finished(fired.body.data.execution_id);
    assert.equal(first.status, 'failed');
    assert.equal((await api('PUT', `/schedules/${s.id}`, { url: `${target.url}/tick/v2`, headers: { 'X-Version': '2' } })).status, 200);
    const res = await retry(first.id);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const again = await finished(res.body.data.execution_id);
    assert.equal(again.status, 'success');
    assert.equal(again.retry_of, first.id);
    assert.equal(again.task.type, 'schedule');
    const got = received('/tick/v2');
    assert.equal(got.length, 1);
    assert.equal(got[0]!.headers['x-version'], '2');
    assert.ok(signedWith(got[0]!, secret, again.id));
  });

  test("an endpoint delivery is retried: the stored request to the same URL through the endpoint's current script, signed afresh", async () => {
    failing.add('/hook/a');
    const created = await api('POST', '/endpoints', { name: 'hooks', forward_urls: [`${target.url}/hook/a`, `${target.url}/hook/b`], retry_attempts: 0 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const ep = created.body.data;
    const sent = await fetch(ep.inbound_url, { method: 'POST', body: '{"n":1}', headers: { 'Content-Type': 'application/json' } });
    assert.equal(sent.status, 200);
    const deliveries = await eventually(async () => {
      const rows = (await api('GET', `/executions?endpoint_id=${ep.id}`)).body.data as any[];
      return rows.length === 2 && rows.every((r) => ['success', 'failed'].includes(r.status)) ? rows : null;
    });
    const failed = deliveries.find((r) => r.task.url.endsWith('/hook/a'))!;
    assert.equal(failed.status, 'failed');
    // The script now adds a header: the retry goes through it.
    const script = 'function transform(req)\n  return {headers = {["X-Script"] = "v2"}}\nend';
    const updated = await api('PUT', `/endpoints/${ep.id}`, { script });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    failing.delete('/hook/a');
    const before = received('/hook/b').length;
    const res = await retry(failed.id);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const again = await finished(res.body.data.execution_id);
    assert.equal(again.status, 'success');
    assert.equal(again.retry_of, failed.id);
    assert.equal(again.task.type, 'endpoint');
    const got = received('/hook/a').at(-1)!;
    assert.equal(got.body, '{"n":1}');
    assert.equal(got.headers['x-script'], 'v2');
    assert.ok(signedWith(got, secret, again.id));
    assert.equal(received('/hook/b').length, before, 'only the retried URL');
  });

  test('pending or running: 409; source gone: 409 field source; another organization: 404', async () => {
    const later = await create({ url: `${target.url}/later`, name: 'later', delay: '1h' });
    const pending = await retry(later.last_execution_id);
    assert.equal(pending.status, 409, JSON.stringify(pending.body));
    failing.add('/gone');
    const gone = await create({ url: `${target.url}/gone`, name: 'gone', retry_attempts: 0 });
    const ended = await finished(gone.last_execution_id);
    // A deleted task takes its executions with it; a lane-cancelled one keeps them.
    const lane = await create({ url: `${target.url}/gone`, name: 'gone in lane', retry_attempts: 0, lane: 'gone' });
    const laneEnded = await finished(lane.last_execution_id);
    assert.equal((await api('DELETE', '/tasks?lane=gone')).status, 200);
    const refused = await retry(laneEnded.id);
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.error?.field ?? refused.body.field, 'source');
    assert.equal((await retry(ended.id, other)).status, 404);
    assert.equal((await retry('exe_nosuchexecution0000')).status, 404);
  });

  test("a lane task's retry joins the back of its lane: it starts after the lane's running task ends", async () => {
    failing.add('/lane/first');
    const first = await finished((await create({ url: `${target.url}/lane/first`, name: 'first', lane: 'retries', retry_attempts: 0 })).last_execution_id);
    failing.delete('/lane/first');
    let release!: () => void;
    held.set('/lane/second', new Promise<void>((r) => (release = r)));
    const second = await create({ url: `${target.url}/lane/second`, name: 'second', lane: 'retries' });
    await eventually(async () => received('/lane/second').length === 1);
    const res = await retry(first.id);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    // Planned (its row is there) while the lane's task runs: not sent.
    assert.equal((await execution(res.body.data.execution_id)).status, 'pending');
    assert.equal(received('/lane/first').length, 1, 'the retry waits behind the running task of its lane');
    release();
    const [b, again] = [await finished(second.last_execution_id), await finished(res.body.data.execution_id)];
    assert.equal(again.status, 'success');
    assert.ok(Date.parse(again.started_at) >= Date.parse(b.finished_at), `the retry started ${again.started_at}, after the lane's running task ended ${b.finished_at}`);
    const order = target.received.filter((r) => r.path.startsWith('/lane/')).map((r) => r.path);
    assert.deepEqual(order, ['/lane/first', '/lane/second', '/lane/first']);
  });

  test('a rebuild of the read models gives the same rows, retry links included', async () => {
    const rows = async () => {
      const list = (await api('GET', '/executions?limit=100')).body.data as any[];
      return Promise.all(list.map(async (r) => ({ row: r, detail: await execution(r.id) })));
    };
    const before = await rows();
    assert.ok(before.some((r) => r.row.retry_of) && before.some((r) => r.row.retried_by));
    await svc.stopService();
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
    await svc.startService();
    assert.deepEqual(await rows(), before);
  });
});
