/** Dead letters, `retry_of`/`retried_by` and the filters the executions list shares with the bulk calls (issue 36, stage 1). */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { executionHelpers } from './support/executions.ts';

describe('execution filters and dead letters', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let ok: any;
  let notFound: any;
  let broken: any;
  let laned: any;
  let viaLocalhost: any;
  let tick: any;
  let schedule: any;
  let laneTask: any;

  const { execution, finished, create } = executionHelpers(() => api);
  const ids = async (query: string, as: Api = api) => {
    const res = await as('GET', `/executions?limit=100&${query}`);
    assert.equal(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    return new Set((res.body.data as { id: string }[]).map((r) => r.id));
  };
  const problem = async (query: string) => {
    const res = await api('GET', `/executions?${query}`);
    return { status: res.status, field: res.body?.error?.field ?? res.body?.field };
  };

  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg()).api;
    other = (await svc.createOrg()).api;
    target = await startTarget((req) => {
      if (req.path.startsWith('/missing')) return { status: 404, body: 'nope' };
      if (req.path.startsWith('/broken')) return { status: 503, body: 'down' };
      return { status: 200, body: 'ok' };
    });
    ok = await finished((await create({ url: `${target.url}/fine`, name: 'fine' })).last_execution_id);
    notFound = await finished((await create({ url: `${target.url}/missing`, name: 'missing', retry_attempts: 0 })).last_execution_id);
    broken = await finished((await create({ url: `${target.url}/broken`, name: 'broken', retry_attempts: 0 })).last_execution_id);
    laneTask = await create({ url: `${target.url}/missing/lane`, name: 'laned', lane: 'billing', retry_attempts: 0 });
    laned = await finished(laneTask.last_execution_id);
    const port = new URL(target.url).port;
    viaLocalhost = await finished((await create({ url: `http://LOCALHOST:${port}/missing/host`, name: 'host', retry_attempts: 0 })).last_execution_id);
    const s = await api('POST', '/schedules', { name: 'nightly', cron: '0 3 * * *', url: `${target.url}/broken/tick`, retry_attempts: 0 });
    assert.equal(s.status, 201, JSON.stringify(s.body));
    schedule = s.body.data;
    const t = await api('POST', `/schedules/${schedule.id}/trigger`, {});
    assert.equal(t.status, 202, JSON.stringify(t.body));
    tick = await finished(t.body.data.execution_id ?? t.body.data.id);
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  test('rows (list and single) show retry_of and retried_by, null when nothing retried them', async () => {
    const one = await execution(notFound.id);
    assert.equal(one.retry_of, null);
    assert.equal(one.retried_by, null);
    const row = (await api('GET', '/executions?limit=100')).body.data.find((r: any) => r.id === notFound.id);
    assert.equal(row.retry_of, null);
    assert.equal(row.retried_by, null);
  });

  test('dead=true lists the executions that failed or timed out after their last attempt', async () => {
    const dead = await ids('dead=true');
    for (const e of [notFound, broken, laned, viaLocalhost, tick]) assert.ok(dead.has(e.id), `${e.id} (${e.status}) is a dead letter`);
    assert.ok(!dead.has(ok.id));
    assert.deepEqual(await ids('dead=false'), await ids(''));
  });

  test('status_code takes codes and classes', async () => {
    assert.deepEqual(await ids('status_code=503'), new Set([broken.id, tick.id]));
    assert.deepEqual(await ids('status_code=5xx'), new Set([broken.id, tick.id]));
    assert.deepEqual(await ids('status_code=404,5xx&source_type=task&dead=true'), new Set([notFound.id, broken.id, laned.id, ...(viaLocalhost.status_code === 404 ? [viaLocalhost.id] : [])]));
    assert.deepEqual(await ids('status_code=2xx'), new Set([ok.id]));
  });

  test('source_type, schedule_id, task_id, endpoint_id and lane', async () => {
    assert.deepEqual(await ids('source_type=schedule'), new Set([tick.id]));
    assert.deepEqual(await ids(`schedule_id=${schedule.id}`), new Set([tick.id]));
    assert.deepEqual(await ids(`task_id=${laneTask.id}`), new Set([laned.id]));
    assert.deepEqual(await ids('source_type=endpoint'), new Set());
    assert.deepEqual(await ids(`endpoint_id=${schedule.id}`), new Set(), 'a schedule id is no endpoint');
    assert.deepEqual(await ids('lane=billing'), new Set([laned.id]));
    assert.deepEqual(await ids('lane=other'), new Set());
    assert.ok(!(await ids('source_type=task')).has(tick.id));
  });

  test('host is the target host name, case-insensitive', async () => {
    assert.deepEqual(await ids('host=localhost'), new Set([viaLocalhost.id]));
    assert.deepEqual(await ids('host=LocalHost'), new Set([viaLocalhost.id]));
    const numeric = await ids(`host=${new URL(target.url).hostname}`);
    assert.ok(numeric.has(ok.id) && numeric.has(tick.id) && !numeric.has(viaLocalhost.id));
  });

  test('error is a case-insensitive substring of error_message', async () => {
    assert.ok(broken.error_message, 'a failed execution has an error message');
    const part = broken.error_message.slice(0, 8).toUpperCase();
    const found = await ids(`error=${encodeURIComponent(part)}`);
    assert.ok(found.has(broken.id));
    assert.ok(!found.has(ok.id));
    assert.deepEqual(await ids('error=no%20such%20error%20anywhere'), new Set());
    // The bulk calls' count (its own query shape: the index-only match) counts what the list lists.
    const counted = await api('POST', '/executions/retry', { filter: { error: part, dead: false }, dry_run: true });
    assert.deepEqual(counted.body.data, { count: found.size }, JSON.stringify(counted.body));
    // A message of more than 2,000 bytes (the index-only match's bound) is found and counted too.
    const long = await create({ url: `${target.url}/fine/long`, name: 'long error', retry_attempts: 0, expected_body_pattern: '€'.repeat(1000) });
    const longRun = await finished(long.last_execution_id);
    assert.equal(longRun.status, 'failed');
    assert.ok(Buffer.byteLength(longRun.error_message) > 2000, 'a long message');
    assert.deepEqual(await ids(`error=${encodeURIComponent('€€€€')}`), new Set([longRun.id]));
    const countedLong = await api('POST', '/executions/retry', { filter: { error: '€€€€', dead: false }, dry_run: true });
    assert.deepEqual(countedLong.body.data, { count: 1 });
  });

  test('finished_after and finished_before take ISO 8601 and relative durations', async () => {
    const all = await ids('finished_after=1h');
    for (const e of [ok, notFound, tick]) assert.ok(all.has(e.id));
    assert.deepEqual(await ids('finished_before=1h'), new Set());
    const at = new Date(Date.parse(broken.finished_at)).toISOString();
    const upTo = await ids(`finished_before=${at}`);
    assert.ok(upTo.has(broken.id) && upTo.has(ok.id) && !upTo.has(tick.id));
    const from = await ids(`finished_after=${at}`);
    assert.ok(from.has(broken.id) && from.has(tick.id) && !from.has(ok.id));
  });

  test('bad values are refused naming the field', async () => {
    assert.deepEqual(await problem('status_code=abc'), { status: 422, field: 'status_code' });
    assert.deepEqual(await problem('status_code=600'), { status: 422, field: 'status_code' });
    assert.deepEqual(await problem('status_code=6xx'), { status: 422, field: 'status_code' });
    assert.deepEqual(await problem('source_type=monitor'), { status: 422, field: 'source_type' });
    assert.deepEqual(await problem('dead=yes'), { status: 422, field: 'dead' });
    assert.deepEqual(await problem('finished_after=yesterday'), { status: 400, field: 'finished_after' });
    assert.deepEqual(await problem('finished_before=2026-13-45T00:00:00Z'), { status: 400, field: 'finished_before' });
    assert.deepEqual(await problem(`error=${'x'.repeat(501)}`), { status: 422, field: 'error' });
  });

  test("another organization's ids are 404 naming the filter, in the list and the bulk calls; its executions are 404", async () => {
    const refused = async (query: string, field: string) => {
      const res = await other('GET', `/executions?${query}`);
      assert.deepEqual([res.status, res.body?.error?.field ?? res.body?.field], [404, field], `${query}: ${JSON.stringify(res.body)}`);
    };
    await refused(`task_id=${laneTask.id}`, 'task_id');
    await refused(`task_id=${schedule.id}`, 'task_id');
    await refused(`schedule_id=${schedule.id}`, 'schedule_id');
    await refused('endpoint_id=ep_nosuchendpoint0000', 'endpoint_id');
    for (const filter of [{ task_id: laneTask.id }, { schedule_id: schedule.id }]) {
      const bulk = await other('POST', '/executions/retry', { filter, dry_run: true });
      assert.deepEqual([bulk.status, bulk.body?.error?.field ?? bulk.body?.field], [404, `filter.${Object.keys(filter)[0]}`], JSON.stringify(bulk.body));
    }
    // The owner's own ids still answer; a task deleted (its executions with it) is not found.
    assert.deepEqual(await ids(`task_id=${laneTask.id}`), new Set([laned.id]));
    const gone = await create({ url: `${target.url}/fine/gone`, name: 'gone' });
    await finished(gone.last_execution_id);
    assert.equal((await api('DELETE', `/tasks/${gone.id}`)).status, 204);
    await eventually(async () => (await api('GET', `/executions?task_id=${gone.id}`)).status === 404);
    assert.deepEqual(await ids('dead=true', other), new Set());
    assert.deepEqual(await ids('lane=billing', other), new Set());
    assert.equal((await other('GET', `/executions/${notFound.id}`)).status, 404);
  });
});
