import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, test, type TestContext } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { inboundEventRow, settled } from './support/inbound-events.ts';
import { startTarget, type ReceivedRequest } from './support/target.ts';
import { mergeMarginMs } from '../src/inbound/router.ts';

// Debounce windows and retries at 1/100: "30s" is 300 ms.
const SCALE = 0.01;
const FINAL = ['success', 'failed', 'timeout', 'cancelled'];
/** Debounce tries, each window twice the last: 600 ms up to 9.6 s. */
const WINDOW_TRIES = 5;

/** HMAC-SHA256 of the raw body with the endpoint's `signing_key` secret, as a sender such as Stripe or GitHub would sign. */
const VERIFY_HMAC = `
function verify(req, secrets)
  local sig = req.headers["x-signature"]
  if sig == nil then
    log("no signature")
    return false, 401
  end
  return sig == secrets.expected
end`;

describe('endpoint scripts on live inbound traffic', () => {
  let svc: TestService;
  let api: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  before(async () => {
    // A 1 s script limit: a trivial hook cannot run past it on a busy machine; the runaway still hits it.
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE), JETCRON_SCRIPT_TIMEOUT_MS: '1000' });
    api = (await svc.createOrg('pro')).api;
    target = await startTarget(() => ({ status: 200, body: 'ok' }));
  });
  after(async () => {
    await target.close();
    await svc.stop();
  });

  async function createEndpoint(body: Record<string, unknown>) {
    const res = await api('POST', '/endpoints', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { id: string; inbound_url: string };
  }
  const send = async (url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const res = await fetch(url, { method: init.method ?? 'POST', body: init.body, headers: init.headers, signal: AbortSignal.timeout(20_000) });
    return { status: res.status, body: (await res.json()) as { id: string; status: string } };
  };
  const eventRow = (endpointId: string, eventId: string, ready?: (row: any) => boolean) => inboundEventRow(api, endpointId, eventId, ready);
  const finished = (id: string) =>
    eventually(async () => {
      const e = (await api('GET', `/executions/${id}`)).body.data;
      return FINAL.includes(e?.status) ? e : null;
    }, 20_000);
  const arrivals = (path: string) => target.received.filter((r: ReceivedRequest) => r.path === path);

  /*
   * Whether a request joins a debounce window depends on when the router reads it, and at
   * test scale a window is short. A test of one therefore tries windows of growing length
   * (a fresh endpoint each), until a try whose requests were all listed, which means routed,
   * before the window's merge margin began: only then must they have joined it, and only
   * then are its rows checked, exactly. A slow machine takes more tries, never a wrong verdict.
   */
  const routedInWindow = (t0: number, windowMs: number) => Date.now() < t0 + windowMs - mergeMarginMs(windowMs);
  const tooSlow = (t: TestContext, attempt: number, windowMs: number) => {
    assert.ok(attempt + 1 < WINDOW_TRIES, `no try's requests were all routed inside their window (the last was ${windowMs} ms)`);
    t.diagnostic(`the requests were not all routed inside a ${windowMs} ms window: trying ${2 * windowMs} ms`);
  };

  test('verify sees the decrypted secrets: a good signature is forwarded, a bad one is 403, false with a code answers that code, and each row says why', async () => {
    const ep = await createEndpoint({
      name: 'verified', forward_urls: [`${target.url}/verified`], retry_attempts: 0,
      secrets: { expected: 'sig-123' }, script: VERIFY_HMAC,
    });
    const good = await send(ep.inbound_url, { body: '{"ok":1}', headers: { 'X-Signature': 'sig-123' } });
    assert.deepEqual([good.status, good.body.status], [200, 'received']);
    const bad = await send(ep.inbound_url, { body: '{"ok":2}', headers: { 'X-Signature': 'forged' } });
    assert.deepEqual([bad.status, bad.body], [403, { id: bad.body.id, status: 'rejected' }]);
    const unsigned = await send(ep.inbound_url, { body: '{"ok":3}' });
    assert.deepEqual([unsigned.status, unsigned.body.status], [401, 'rejected']);

    const goodRow = await eventRow(ep.id, good.body.id, settled);
    assert.equal(goodRow.execution_status, 'success');
    assert.equal(goodRow.error_message, null);
    const badRow = await eventRow(ep.id, bad.body.id);
    assert.deepEqual([badRow.outcome, badRow.execution_status, badRow.executions], ['rejected', 'rejected', []]);
    assert.match(badRow.error_message, /verify returned false \(answered 403\)/);
    const unsignedRow = await eventRow(ep.id, unsigned.body.id);
    assert.match(unsignedRow.error_message, /answered 401/);
    assert.deepEqual(unsignedRow.script_logs, ['no signature']);
    // The rejected ones are stored all the same, but never forwarded: a good request sent
    // after them is forwarded, and it is the only other one that reached the target.
    const later = await send(ep.inbound_url, { body: '{"ok":4}', headers: { 'X-Signature': 'sig-123' } });
    await eventRow(ep.id, later.body.id, settled);
    assert.deepEqual(arrivals('/verified').map((r) => r.body).sort(), ['{"ok":1}', '{"ok":4}']);
    const stored = await api('GET', `/endpoints/${ep.id}/events/${bad.body.id}`);
    assert.equal(stored.body.data.request.body, '{"ok":2}');
  });

  test('a verify that runs away or errors rejects with 403 (the limit is in the row), and plain requests are answered meanwhile', async () => {
    const ep = await createEndpoint({
      name: 'runaway-verify', forward_urls: [`${target.url}/runaway`],
      script: 'function verify(req)\n  if req.body == "boom" then error("bad input") end\n  while true do end\nend',
    });
    // No claim on how fast: that the Lua runs off the main thread (whose timers keep firing
    // meanwhile) is script-engine.unit's runaway test; here both requests are answered.
    const [stuck, plain] = await Promise.all([send(ep.inbound_url, { body: 'loop' }), api('GET', '/tasks')]);
    assert.deepEqual([stuck.status, stuck.body.status], [403, 'rejected']);
    assert.equal(plain.status, 200);
    const row = await eventRow(ep.id, stuck.body.id);
    assert.match(row.error_message, /verify: .*1000 ms/);
    assert.match(row.script_logs.at(-1), /verify failed: .*1000 ms/);

    const erroring = await send(ep.inbound_url, { body: 'boom' });
    assert.equal(erroring.status, 403);
    assert.match((await eventRow(ep.id, erroring.body.id)).error_message, /bad input/);
    assert.equal(arrivals('/runaway').length, 0);
  });

  test('filter false stores the event and forwards nothing; filter true forwards', async () => {
    const ep = await createEndpoint({
      name: 'filtered', forward_urls: [`${target.url}/filtered`],
      script: 'function filter(req)\n  local e = json.decode(req.body)\n  log("type", e.type)\n  return e.type == "invoice.paid"\nend',
    });
    const dropped = await send(ep.inbound_url, { body: '{"type":"invoice.created"}' });
    const kept = await send(ep.inbound_url, { body: '{"type":"invoice.paid"}' });
    assert.equal(dropped.status, 200);
    const droppedRow = await eventRow(ep.id, dropped.body.id);
    assert.deepEqual([droppedRow.outcome, droppedRow.execution_status, droppedRow.execution_id], ['filtered', 'filtered', null]);
    assert.deepEqual(droppedRow.script_logs, ['type\tinvoice.created']);
    const keptRow = await eventRow(ep.id, kept.body.id, settled);
    assert.equal(keptRow.execution_status, 'success');
    // The execution shows the lines its event's hooks logged.
    assert.deepEqual((await finished(keptRow.execution_id)).script_logs, ['type\tinvoice.paid']);
    assert.deepEqual(arrivals('/filtered').map((r) => r.body), ['{"type":"invoice.paid"}']);
  });

  test('transform overrides what it returns and keeps the custom forwarding values it leaves out', async () => {
    const ep = await createEndpoint({
      name: 'transformed', forward_urls: [`${target.url}/transformed`],
      forward_method: 'PUT', forward_headers: { 'X-From-Endpoint': 'kept', 'X-Overridden': 'endpoint' },
      script: 'function transform(req)\n  local e = json.decode(req.body)\n  return {headers = {["X-Overridden"] = "script"}, body = json.encode({id = e.id, amount = e.amount * 100})}\nend',
    });
    const sent = await send(ep.inbound_url, { body: '{"id":"ch_1","amount":12.5,"noise":"x"}', headers: { 'Content-Type': 'application/json' } });
    await eventRow(ep.id, sent.body.id, settled);
    const [got] = arrivals('/transformed');
    assert.ok(got);
    assert.equal(got.method, 'PUT');
    assert.equal(got.headers['x-from-endpoint'], 'kept');
    assert.equal(got.headers['x-overridden'], 'script');
    assert.deepEqual(JSON.parse(got.body), { id: 'ch_1', amount: 1250 });
  });

  test('route forwards to the chosen forward_urls only; a URL outside them fails the deliveries unforwarded', async () => {
    const ep = await createEndpoint({
      name: 'routed', forward_urls: [`${target.url}/route-a`, `${target.url}/route-b`, `${target.url}/route-c`], retry_attempts: 3,
      script: `function route(req)
  if req.body == "elsewhere" then return {"https://attacker.example/steal"} end
  return {"${target.url}/route-b", "${target.url}/route-c"}
end`,
    });
    const subset = await send(ep.inbound_url, { body: 'normal' });
    const row = await eventRow(ep.id, subset.body.id, settled);
    assert.deepEqual(row.executions.map((x: any) => x.url).sort(), [`${target.url}/route-b`, `${target.url}/route-c`]);
    const outside = await send(ep.inbound_url, { body: 'elsewhere' });
    const failedRow = await eventRow(ep.id, outside.body.id, settled);
    assert.match(failedRow.error_message, /route: https:\/\/attacker\.example\/steal is not one of the endpoint's forward_urls/);
    assert.equal(failedRow.execution_status, 'failed');
    const exe = await finished(failedRow.execution_id);
    assert.equal(exe.attempt, 1, 'a script failure is not retried');
    assert.match(exe.error_message, /not forwarded: the endpoint script failed: route:/);
    assert.match(exe.script_logs.at(-1), /route failed/);
    assert.deepEqual(exe.attempts.map((a: any) => a.status_code), [null]);
    // Both rows are settled (every execution final): what reached the target is all that will.
    assert.equal(arrivals('/route-a').length, 0);
    assert.deepEqual(arrivals('/route-b').map((r) => r.body), ['normal']);
    assert.deepEqual(arrivals('/route-c').map((r) => r.body), ['normal']);
  });

  test('transform debounce: events with one key inside the window forward the latest payload once, at the first event\'s time plus the window', async (t) => {
    for (let attempt = 0; ; attempt++) {
      const seconds = 60 * 2 ** attempt;
      const windowMs = seconds * 1000 * SCALE;
      const path = `/debounced/${attempt}`;
      const ep = await createEndpoint({
        name: `debounced-${attempt}`, forward_urls: [`${target.url}${path}`],
        script: `function transform(req)\n  local e = json.decode(req.body)\n  return {debounce_key = e.customer, debounce = "${seconds}s"}\nend`,
      });
      const t0 = Date.now();
      const ids: string[] = [];
      for (const n of [1, 2, 3]) ids.push((await send(ep.inbound_url, { body: JSON.stringify({ customer: 'cus_1', n }) })).body.id);
      const other = (await send(ep.inbound_url, { body: JSON.stringify({ customer: 'cus_2', n: 9 }) })).body.id;
      await Promise.all(ids.map((id) => eventRow(ep.id, id)));
      if (!routedInWindow(t0, windowMs)) {
        tooSlow(t, attempt, windowMs);
        continue;
      }
      const rows = await Promise.all(ids.map((id) => eventRow(ep.id, id, settled)));
      assert.deepEqual(rows.map((r) => r.outcome), ['forwarding', 'debounced', 'debounced']);
      assert.equal(new Set(rows.map((r) => r.execution_id)).size, 1, 'one execution for the window');
      await eventRow(ep.id, other, settled);
      const got = arrivals(path);
      assert.deepEqual(got.map((r) => JSON.parse(r.body)).sort((a, b) => a.n - b.n), [{ customer: 'cus_1', n: 3 }, { customer: 'cus_2', n: 9 }]);
      const first = got.find((r) => JSON.parse(r.body).n === 3)!;
      assert.ok(first.at - t0 >= windowMs - 15, `forwarded ${first.at - t0} ms after the first event, before the ${windowMs} ms window ended`);
      // The window has ended: the same key opens a new one.
      const later = (await send(ep.inbound_url, { body: JSON.stringify({ customer: 'cus_1', n: 4 }) })).body.id;
      const laterRow = await eventRow(ep.id, later, settled);
      assert.equal(laterRow.outcome, 'forwarding');
      assert.notEqual(laterRow.execution_id, rows[0].execution_id);
      return;
    }
  });

  test('replaying a stored event runs the endpoint\'s current script', async () => {
    const ep = await createEndpoint({
      name: 'replayed', forward_urls: [`${target.url}/replayed`],
      script: 'function transform(req) return {body = "v1:" .. req.body} end',
    });
    const sent = await send(ep.inbound_url, { body: 'payload' });
    await eventRow(ep.id, sent.body.id, settled);
    const updated = await api('PUT', `/endpoints/${ep.id}`, { script: 'function transform(req) log("second version") return {body = "v2:" .. req.body} end' });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    const replay = await api('POST', `/endpoints/${ep.id}/events/${sent.body.id}/replay`);
    assert.equal(replay.status, 202, JSON.stringify(replay.body));
    const exe = await finished(replay.body.data.execution_ids[0]);
    assert.equal(exe.status, 'success');
    assert.deepEqual(exe.script_logs, ['second version']);
    await eventually(async () => arrivals('/replayed').length === 2);
    assert.deepEqual(arrivals('/replayed').map((r) => r.body), ['v1:payload', 'v2:payload']);
  });

  test('on_response turns a 200 into a failure that is retried, and its verdict on the retry ends it', async () => {
    const task = await api('POST', '/tasks', {
      url: `${target.url}/on-response`, retry_attempts: 2,
      script: 'function on_response(res, task)\n  log("attempt", task.attempt)\n  if task.attempt == 1 then return {status = "failed"} end\nend',
    });
    assert.equal(task.status, 201, JSON.stringify(task.body));
    const exe = await finished(task.body.data.last_execution_id);
    assert.equal(exe.status, 'success');
    assert.deepEqual(exe.attempts.map((a: any) => [a.attempt, a.status, a.status_code]), [[1, 'failed', 200], [2, 'success', 200]]);
    assert.deepEqual(exe.script_logs, ['attempt\t2']);
    assert.equal(arrivals('/on-response').length, 2);
  });

  test('the README\'s example endpoint script works as the README says', async (t) => {
    const readme = /```lua\n([\s\S]*?)```/.exec(readFileSync(new URL('../README.md', import.meta.url), 'utf8'))?.[1];
    assert.ok(readme, 'README.md has a lua block');
    const signed = (body: string) => ({ body, headers: { 'X-Hub-Signature-256': `sha256=${createHmac('sha256', 'gh-secret').update(body).digest('hex')}` } });
    for (let attempt = 0; ; attempt++) {
      // "1m" at the test's time scale is 600 ms; a later try lengthens only the window.
      const minutes = 2 ** attempt;
      const windowMs = minutes * 60_000 * SCALE;
      const script = readme.replace('debounce = "1m"', `debounce = "${minutes}m"`);
      assert.ok(script.includes(`debounce = "${minutes}m"`), 'the README\'s example debounces for "1m"');
      const path = `/readme/${attempt}`;
      const ep = await createEndpoint({ name: `readme-example-${attempt}`, forward_urls: [`${target.url}${path}`], secrets: { signing_key: 'gh-secret' }, script });
      const t0 = Date.now();
      const first = await send(ep.inbound_url, signed('{"type":"invoice.paid","id":"in_1","amount":500,"customer":"cus_9"}'));
      const second = await send(ep.inbound_url, signed('{"type":"invoice.paid","id":"in_2","amount":700,"customer":"cus_9"}'));
      assert.deepEqual([first.status, second.status], [200, 200]);
      await Promise.all([first, second].map((r) => eventRow(ep.id, r.body.id)));
      if (!routedInWindow(t0, windowMs)) {
        tooSlow(t, attempt, windowMs);
        continue;
      }
      const created = await send(ep.inbound_url, signed('{"type":"invoice.created","id":"in_3","amount":1,"customer":"cus_9"}'));
      const forged = await send(ep.inbound_url, { body: '{"type":"invoice.paid","id":"in_4","amount":9,"customer":"cus_9"}', headers: { 'X-Hub-Signature-256': 'sha256=00' } });
      assert.deepEqual([created.status, forged.status], [200, 403]);
      assert.equal((await eventRow(ep.id, created.body.id)).outcome, 'filtered');
      const row = await eventRow(ep.id, second.body.id, settled);
      assert.equal(row.outcome, 'debounced');
      assert.deepEqual(row.script_logs, ['invoice\tin_2']);
      const got = arrivals(path);
      assert.deepEqual(got.map((r) => JSON.parse(r.body)), [{ id: 'in_2', cents: 700 }]);
      assert.ok(got[0]!.at - t0 >= windowMs - 15, `forwarded after ${got[0]!.at - t0} ms`);
      return;
    }
  });
});
