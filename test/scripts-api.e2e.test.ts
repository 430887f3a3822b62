import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

describe('Lua scripts: checked when saved, and the test call', () => {
  let svc: TestService;
  let pro: Api;
  let free: Api;
  before(async () => {
    svc = await startTestService();
    pro = (await svc.createOrg('pro')).api;
    free = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  const assertError = (res: { status: number; body: any }, status: number, field: string, pattern: RegExp) => {
    assert.equal(res.status, status, JSON.stringify(res.body));
    assert.equal(res.body.error.field, field);
    assert.match(res.body.error.message, pattern);
  };

  test('a script that does not compile is 422 on every resource, with Lua message and line', async () => {
    const broken = 'function on_response(res, task)\n  return {status = = "success"}\nend';
    assertError(await pro('POST', '/tasks', { url: 'https://example.com/a', delay: '1h', script: broken }), 422, 'script', /script:2:/);
    assertError(await pro('POST', '/schedules', { url: 'https://example.com/a', cron: '0 * * * *', script: broken }), 422, 'script', /script:2:/);
    assertError(await pro('POST', '/endpoints', { name: 'hooks', forward_urls: ['https://example.com/f'], script: 'function verify(req)\n  return true\n  x' }), 422, 'script', /script:3:/);
  });

  test('a script that defines none of the hooks its resource can use is 422; one that does is stored', async () => {
    assertError(await pro('POST', '/tasks', { url: 'https://example.com/a', delay: '1h', script: 'function verify(req) return true end' }), 422, 'script', /none of on_response/);
    assertError(await pro('POST', '/endpoints', { name: 'no-hooks', forward_urls: ['https://example.com/f'], script: 'function on_response() end' }), 422, 'script', /none of verify, filter, transform, route/);
    const ok = await pro('POST', '/tasks', { url: 'https://example.com/a', delay: '1h', script: 'function on_response(res, task) return {status = "success"} end' });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assertError(await pro('PUT', `/tasks/${ok.body.data.id}`, { script: 'function on_response(' }), 422, 'script', /script:1:/);
    const ep = await pro('POST', '/endpoints', { name: 'filtering', forward_urls: ['https://example.com/f'], script: 'function filter(req) return req.method == "POST" end' });
    assert.equal(ep.status, 201, JSON.stringify(ep.body));
    assertError(await pro('PUT', `/endpoints/${ep.body.data.id}`, { script: 'while true do end' }), 422, 'script', /took longer than 1000 ms/);
  });

  test('the Free plan hears that scripts need Pro, whatever the script', async () => {
    assertError(await free('POST', '/tasks', { url: 'https://example.com/a', delay: '1h', script: 'not lua at all (' }), 403, 'script', /Pro/);
    assertError(await free('POST', '/scripts/test', { script: 'function filter() return true end', hook: 'filter' }), 403, 'script', /Pro/);
  });

  test('POST /scripts/test runs one hook as the service would: result, logs, duration, error', async () => {
    const verify = await pro('POST', '/scripts/test', {
      script: 'function verify(req, secrets)\n  log("sig", req.headers["x-sig"])\n  if req.headers["x-sig"] ~= secrets.key then return false, 401 end\n  return true\nend',
      hook: 'verify',
      request: { method: 'POST', headers: { 'X-Sig': 'nope' }, body: '{}' },
      secrets: { key: 'right' },
    });
    assert.equal(verify.status, 200, JSON.stringify(verify.body));
    assert.deepEqual(verify.body.result, [false, 401]);
    assert.deepEqual(verify.body.logs, ['sig\tnope']);
    assert.equal(verify.body.error, null);
    assert.equal(typeof verify.body.duration_ms, 'number');

    const transform = await pro('POST', '/scripts/test', {
      script: 'function transform(req)\n  local b = json.decode(req.body)\n  return {body = json.encode({n = b.n + 1}), debounce_key = "k", debounce = "5m"}\nend',
      hook: 'transform',
      request: { body: '{"n": 41}' },
    });
    assert.equal(transform.status, 200, JSON.stringify(transform.body));
    assert.deepEqual(transform.body.result, { body: '{"n":42}', debounce_key: 'k', debounce: '5m' });

    const onResponse = await pro('POST', '/scripts/test', {
      script: 'function on_response(res, task)\n  if res.status == 200 and res.body:find("error") then return {status = "failed"} end\nend',
      hook: 'on_response',
      response: { status: 200, headers: {}, body: '{"error": "quota"}', duration_ms: 12 },
      task: { id: 'tsk_1', name: 'n', url: 'https://example.com', method: 'POST', attempt: 1 },
    });
    assert.deepEqual(onResponse.body.result, { status: 'failed' });
  });

  test('a runaway or broken hook answers 200 with the error; nothing stalls', async () => {
    const loop = await pro('POST', '/scripts/test', { script: 'function filter(req) while true do end end', hook: 'filter' });
    assert.equal(loop.status, 200);
    assert.match(loop.body.error, /took longer than 1000 ms/);
    assert.equal(loop.body.result, null);
    const find = await pro('POST', '/scripts/test', { script: 'function filter(req) return string.rep("a", 1e5):find(".-.-.-.-b") end', hook: 'filter' });
    assert.match(find.body.error, /100 ms|took longer/);
    const escape = await pro('POST', '/scripts/test', { script: 'function filter(req) return type(os), type(io), type(require), type(load), type(js) end', hook: 'filter' });
    assert.deepEqual(escape.body.result, ['nil', 'nil', 'nil', 'nil', 'nil']);
    const missing = await pro('POST', '/scripts/test', { script: 'function filter(req) return true end', hook: 'route' });
    assert.match(missing.body.error, /no route function/);
    assertError(await pro('POST', '/scripts/test', { script: 'function filter(', hook: 'filter' }), 422, 'script', /script:1:/);
    assertError(await pro('POST', '/scripts/test', { script: 'function filter() end', hook: 'delete_everything' }), 422, 'hook', /./);
    // The service still answers at once.
    assert.equal((await pro('GET', '/tasks')).status, 200);
  });

  test('on_response decides the outcome of each attempt; its log lines and errors are the execution\'s script_logs', async () => {
    const target = await startTarget((req) => (req.path.startsWith('/broken') ? { status: 500, body: 'down' } : { status: 200, body: '{"error": "quota exceeded"}' }));
    try {
      const finished = (id: string) => eventually(async () => {
        const e = (await pro('GET', `/executions/${id}`)).body.data;
        return ['success', 'failed', 'timeout'].includes(e?.status) ? e : null;
      });
      // A 200 whose body says it failed: the script fails it (no retries left, so final).
      const strict = (await pro('POST', '/tasks', {
        url: `${target.url}/ok`, retry_attempts: 0,
        script: 'function on_response(res, task)\n  log("got", res.status, task.attempt)\n  if res.body:find("error") then return {status = "failed"} end\nend',
      })).body.data;
      const e1 = await finished(strict.last_execution_id);
      assert.equal(e1.status, 'failed');
      assert.equal(e1.status_code, 200);
      assert.match(e1.error_message, /script/);
      assert.deepEqual(e1.script_logs, ['got\t200\t1']);
      // A 500 the script accepts.
      const lenient = (await pro('POST', '/tasks', { url: `${target.url}/broken`, retry_attempts: 2, script: 'function on_response(res) if res.status == 500 then return {status = "success"} end end' })).body.data;
      const e2 = await finished(lenient.last_execution_id);
      assert.equal(e2.status, 'success');
      assert.equal(e2.attempt, 1);
      // A runaway script keeps the HTTP outcome, and says why in the logs.
      const runaway = (await pro('POST', '/tasks', { url: `${target.url}/ok`, script: 'function on_response(res) while true do end end' })).body.data;
      const e3 = await finished(runaway.last_execution_id);
      assert.equal(e3.status, 'success');
      assert.equal(e3.script_logs.length, 1);
      assert.match(e3.script_logs[0], /on_response failed: .*took longer than 1000 ms/);
    } finally {
      await target.close();
    }
  });
});
