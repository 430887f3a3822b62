import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { ENDPOINT_DEFAULTS, type Endpoint } from '../src/commands/endpoint/types.ts';
import { planDelivery, ScriptsUnavailableError, type HookRequest } from '../src/inbound/pipeline.ts';
import type { StoredRequest } from '../src/inbound/stored-request.ts';
import { isTransient } from '../src/lib/transient.ts';
import { createScriptEngine, ScriptEngineUnavailableError } from '../src/scripts/engine.ts';
import { endpointScriptHooks } from '../src/inbound/endpoint-hooks.ts';
import { eventually } from './support/wait.ts';

// Which limit ends a call must not depend on the machine's speed: the time limit (2 s) and
// the queue wait are far from what a trivial hook takes on a busy machine; the runaways
// allocate nothing, so only the time limit can end them.
const TIME_LIMIT_MS = 2_000;
const ROOMY = 120_000;
const engine = createScriptEngine({ workers: 1, timeoutMs: TIME_LIMIT_MS, queueWaitMs: ROOMY });
after(() => engine.close());

const req: HookRequest = { method: 'POST', path: '/in/x', query: 'a=1', headers: { 'x-sig': 'abc', 'content-type': 'application/json' }, body: '{"kind":"paid","n":1}', source_ip: '10.0.0.1' };
const URLS = ['https://a.example/hook', 'https://b.example/hook'];

describe('endpoint hooks over the script engine (the contract\'s rules)', () => {
  test('verify: true accepts; false rejects 403; false, 401 rejects 401; a code outside 4xx is 403; an error rejects', async () => {
    const h = (body: string) => endpointScriptHooks(engine, `function verify(req, secrets)\n${body}\nend`);
    assert.deepEqual(await h('return req.headers["x-sig"] == secrets.key').verify(req, { key: 'abc' }), { ok: true, value: { accepted: true }, logs: [] });
    assert.deepEqual(await h('return false').verify(req, {}), { ok: true, value: { accepted: false, status_code: 403 }, logs: [] });
    assert.deepEqual(await h('log("bad sig") return false, 401').verify(req, {}), { ok: true, value: { accepted: false, status_code: 401 }, logs: ['bad sig'] });
    assert.deepEqual((await h('return false, 500').verify(req, {})), { ok: true, value: { accepted: false, status_code: 403 }, logs: [] });
    assert.deepEqual((await h('return nil').verify(req, {})), { ok: true, value: { accepted: false, status_code: 403 }, logs: [] });
    const broken = await h('error("no key")').verify(req, {});
    assert.equal(broken.ok, false);
    assert.match(!broken.ok ? broken.error : '', /^verify: script:2: no key/);
    assert.deepEqual(await endpointScriptHooks(engine, 'function filter() return true end').verify(req, {}), { ok: true, value: { accepted: true }, logs: [] });
  });

  test('filter: only false drops the delivery; a runaway is an error', async () => {
    const h = (body: string) => endpointScriptHooks(engine, `function filter(req)\n${body}\nend`);
    assert.deepEqual(await h('return json.decode(req.body).kind == "paid"').filter(req), { ok: true, value: true, logs: [] });
    assert.deepEqual(await h('return false').filter(req), { ok: true, value: false, logs: [] });
    assert.deepEqual(await h('return nil').filter(req), { ok: true, value: true, logs: [] });
    const loop = await h('while true do end').filter(req);
    assert.equal(loop.ok, false);
    assert.match(!loop.ok ? loop.error : '', /longer than 2000 ms/);
  });

  test('transform: the fields it returns, checked; debounce_key and debounce together', async () => {
    const h = (body: string) => endpointScriptHooks(engine, `function transform(req)\n${body}\nend`);
    assert.deepEqual(await h('local b = json.decode(req.body)\nreturn {method = "PUT", headers = {["x-n"] = tostring(b.n)}, body = json.encode({n = b.n + 1})}').transform(req), {
      ok: true, value: { method: 'PUT', headers: { 'x-n': '1' }, body: '{"n":2}' }, logs: [],
    });
    assert.deepEqual(await h('return {debounce_key = "order-7", debounce = "5m"}').transform(req), { ok: true, value: { debounce_key: 'order-7', debounce: '5m' }, logs: [] });
    assert.deepEqual(await h('return nil').transform(req), { ok: true, value: null, logs: [] });
    for (const [body, message] of [
      ['return {method = 7}', /method must be a string/],
      ['return {headers = {a = 1}}', /headers must be a table of strings/],
      ['return {debounce_key = "k"}', /go together/],
      ['return "PUT"', /must return a table/],
    ] as const) {
      const out = await h(body).transform(req);
      assert.equal(out.ok, false, body);
      assert.match(!out.ok ? out.error : '', message);
    }
  });

  test('route: a list of the endpoint\'s forward_urls; any other URL is an error, never a destination', async () => {
    const h = (body: string) => endpointScriptHooks(engine, `function route(req)\n${body}\nend`);
    assert.deepEqual(await h(`return {"${URLS[1]}"}`).route(req, URLS), { ok: true, value: [URLS[1]], logs: [] });
    assert.deepEqual(await h('return {}').route(req, URLS), { ok: true, value: [], logs: [] });
    assert.deepEqual(await h('return nil').route(req, URLS), { ok: true, value: null, logs: [] });
    const stranger = await h('return {"https://evil.example/steal"}').route(req, URLS);
    assert.equal(stranger.ok, false);
    assert.match(!stranger.ok ? stranger.error : '', /evil\.example.*not one of the endpoint's forward_urls/);
    const notList = await h('return "x"').route(req, URLS);
    assert.equal(notList.ok, false);
  });

  test('a hook the script does not define is learnt once: later calls of it pass without a worker', async () => {
    let calls = 0;
    const counting = { ...engine, run: (call: Parameters<typeof engine.run>[0]) => (calls++, engine.run(call)) };
    const script = `function filter(req) return true end -- ${Math.random()}`;
    for (let i = 0; i < 3; i++) assert.deepEqual(await endpointScriptHooks(counting, script).verify(req, {}), { ok: true, value: { accepted: true }, logs: [] });
    assert.equal(calls, 1, 'verify is missing: asked once');
    for (let i = 0; i < 3; i++) assert.deepEqual(await endpointScriptHooks(counting, script).filter(req), { ok: true, value: true, logs: [] });
    assert.equal(calls, 4, 'filter is defined: run every time');
  });
});

describe('an engine that cannot run the hook is no verdict on the event', () => {
  // A queue wait far below the time limit: a waiting call surely gives up while the runaway runs.
  const tiny = createScriptEngine({ workers: 1, timeoutMs: TIME_LIMIT_MS, queueWaitMs: 20, maxQueued: 1 });
  after(() => tiny.close());

  test('busy: the hook answers unavailable, and planning the event throws a 503 the router retries', async () => {
    // The worker is up, so the first call runs at once rather than waiting in the queue for it.
    await eventually(() => tiny.stats().ready >= 1, ROOMY, 5);
    const hooks = endpointScriptHooks(tiny, 'function filter(req) while true do end end');
    const [first, second] = await Promise.all([hooks.filter(req), hooks.filter(req)]);
    assert.equal(first.ok, false);
    assert.ok(!first.ok && !first.unavailable && /longer than 2000 ms/.test(first.error), 'the runaway itself is the script\'s fault');
    assert.ok(!second.ok && second.unavailable && /script engine busy/.test(second.error), JSON.stringify(second));
    const endpoint = { ...ENDPOINT_DEFAULTS, id: 'ep_1', org_id: 'org_1', name: 'e', slug: 'ep_x', forward_urls: URLS, script: 'x' } as unknown as Endpoint;
    const request: StoredRequest = {
      meta: { id: 'evt_1', org_id: 'org_1', endpoint_id: 'ep_1', method: 'POST', path: '/in/ep_x', query: '', headers: [], source_ip: null, received_at: new Date().toISOString(), body_size: 2 },
      body: Buffer.from('{}'),
    };
    // A save's check while the engine is that busy is no verdict either: it throws what the API answers 503 for.
    const loop = tiny.run({ script: 'function f() while true do end end', hook: 'f', args: [] });
    const waiting = tiny.run({ script: 'function f() return 1 end', hook: 'f', args: [] });
    await assert.rejects(tiny.check('function filter() end', ['filter']), (err: unknown) => err instanceof ScriptEngineUnavailableError && isTransient(err));
    await Promise.all([loop, waiting]);
    const busy = { ...hooks, filter: async () => second };
    await assert.rejects(
      planDelivery({ endpoint, route: request.meta, request: async () => request, hooks: busy, now: request.meta.received_at, executionId: (i) => `exe_${i}` }),
      (err: unknown) => err instanceof ScriptsUnavailableError && err.status === 503 && isTransient(err),
    );
  });
});
