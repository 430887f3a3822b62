import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { heldCount } from './support/positions.ts';
import { startTarget } from './support/target.ts';

// Endpoint forwarding backoff (30 s · 2^(n−1)) runs at this scale.
const SCALE = 0.001;
const MIB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SPEC_FIELDS = [
  'name', 'forward_urls', 'retry_attempts', 'use_lane', 'enabled', 'forward_method', 'forward_headers', 'forward_body',
  'on_failure_url', 'on_recovery_url', 'notify_on_failure', 'notify_on_recovery', 'script',
];
const STATE_FIELDS = ['id', 'slug', 'inbound_url', 'paused', 'secret_names', 'created_at', 'updated_at'];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

type Reply = { status: number; body: any; headers: Headers | http.IncomingHttpHeaders };

/** One request to an inbound URL, with no API key. */
async function inbound(url: string, init: RequestInit = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(20_000) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, headers: res.headers };
}

/**
 * A raw node:http request, for what fetch cannot do reliably: `headersOnly` sends the
 * headers (with the given Content-Length) and waits for the answer without sending a
 * body; `chunks` sends a chunked body (no Content-Length).
 */
function rawRequest(url: string, opts: { method: string; headers?: Record<string, string>; chunks?: Buffer[]; headersOnly?: boolean }): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(url, { method: opts.method, headers: opts.headers ?? {}, timeout: 20_000 }, (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      const done = () => {
        const text = Buffer.concat(parts).toString('utf8');
        let body: unknown = text;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode!, body, headers: res.headers });
        if (opts.headersOnly) req.destroy();
      };
      res.on('end', done);
      res.on('error', done);
    });
    // After the answer the server may close the connection on the unsent rest of the body.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    if (opts.headersOnly) {
      req.flushHeaders();
      return;
    }
    (async () => {
      for (const chunk of opts.chunks ?? []) {
        if (answered || req.destroyed) return;
        if (!req.write(chunk)) {
          await new Promise<void>((r) => {
            const done = () => {
              req.off('drain', done);
              req.off('close', done);
              r();
            };
            req.on('drain', done);
            req.on('close', done);
          });
        }
      }
      if (!req.destroyed) req.end();
    })().catch(() => {});
  });
}

const assertError = (res: Reply, status: number, field: string | null | RegExp) => {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.deepEqual(Object.keys(res.body ?? {}), ['error'], JSON.stringify(res.body));
  assert.equal(typeof res.body.error.message, 'string');
  assert.ok(res.body.error.message.length > 0);
  if (field instanceof RegExp) assert.match(String(res.body.error.field), field);
  else assert.equal(res.body.error.field, field);
};

describe('endpoints API and inbound URLs', () => {
  let svc: TestService;
  let api: Api; // Pro
  let free: Api;
  let other: Api; // Pro, a different organization
  let target: Awaited<ReturnType<typeof startTarget>>;

  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg('pro')).api;
    free = (await svc.createOrg('free')).api;
    other = (await svc.createOrg('pro')).api;
    target = await startTarget();
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  const create = async (body: Record<string, unknown>, client: Api = api) => {
    const res = await client('POST', '/endpoints', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  };
  const events = async (id: string, query = '', client: Api = api) => {
    const res = await client('GET', `/endpoints/${id}/events${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data as any[];
  };
  const hits = (prefix: string) => target.received.filter((r) => r.path.startsWith(prefix));
  /** Until the event `id` is listed; returns the whole list then. */
  const listed = (epId: string, id: string, client: Api = api) =>
    eventually(async () => {
      const rows = await events(epId, '?limit=100', client);
      return rows.some((e) => e.id === id) ? rows : null;
    });
  /**
   * Sends one more request and waits for it to be listed. INBOUND is routed in
   * arrival order per endpoint, so anything sent earlier that was going to be
   * stored is listed by then too.
   */
  const settled = async (ep: { id: string; inbound_url: string }) => {
    const marker = await inbound(ep.inbound_url, { method: 'POST', body: 'marker' });
    assert.equal(marker.status, 200, JSON.stringify(marker.body));
    return listed(ep.id, marker.body.id);
  };

  describe('endpoints API', () => {
    test('create with every field (Pro): ids, slug, inbound_url, secret_names, no secrets in any response', async () => {
      const input = {
        name: 'github',
        forward_urls: [`${target.url}/full/a`, `${target.url}/full/b`],
        retry_attempts: 3,
        use_lane: false,
        enabled: true,
        forward_method: 'PUT',
        forward_headers: { 'X-Extra': 'yes', Authorization: 'Bearer downstream' },
        forward_body: '{"replaced":true}',
        on_failure_url: `${target.url}/full/failed`,
        on_recovery_url: `${target.url}/full/recovered`,
        notify_on_failure: true,
        notify_on_recovery: false,
        script: 'function verify(req, secrets) return req.headers["x-token"] == secrets.TOKEN end',
        secrets: { TOKEN: 'tok-value-1', A_KEY: 'akey-value-2' },
      };
      const res = await api('POST', '/endpoints', input);
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.deepEqual(Object.keys(res.body), ['data']);
      const ep = res.body.data;
      const { secrets: _secrets, ...echoed } = input;
      for (const [k, v] of Object.entries(echoed)) assert.deepEqual(ep[k], v, k);
      for (const f of [...SPEC_FIELDS, ...STATE_FIELDS]) assert.ok(f in ep, `missing ${f}`);
      assert.match(ep.id, /^ep_[0-9a-z]+$/);
      assert.match(ep.slug, /^ep_[0-9a-z]{32}$/);
      assert.notEqual(ep.slug, ep.id);
      assert.equal(ep.inbound_url, `${svc.url}/in/${ep.slug}`);
      assert.equal(ep.paused, false);
      assert.deepEqual(ep.secret_names, ['A_KEY', 'TOKEN'], 'names, sorted');
      assert.match(ep.created_at, ISO);
      assert.match(ep.updated_at, ISO);
      assert.equal(ep.created_at, ep.updated_at);

      const leaks = (body: unknown) => {
        const text = JSON.stringify(body);
        assert.ok(!text.includes('tok-value-1') && !text.includes('akey-value-2'), `secret value in ${text}`);
        assert.ok(!/"secrets"|sealed/.test(text), `secrets field in ${text}`);
      };
      leaks(res.body);
      const one = await api('GET', `/endpoints/${ep.id}`);
      assert.equal(one.status, 200);
      assert.deepEqual(one.body, { data: ep });
      leaks(one.body);
      leaks((await api('GET', '/endpoints')).body);
      leaks((await api('POST', `/endpoints/${ep.id}/pause`)).body);
      leaks((await api('POST', `/endpoints/${ep.id}/resume`)).body);
      const put = await api('PUT', `/endpoints/${ep.id}`, { name: 'github-2' });
      leaks(put.body);
      assert.deepEqual(put.body.data.secret_names, ['A_KEY', 'TOKEN'], 'a PUT without secrets keeps them');
    });

    test('defaults, list newest first, PUT subset, empty custom forwarding means the original', async () => {
      const a = await create({ name: 'defaults' });
      assert.deepEqual(a.forward_urls, []);
      assert.equal(a.retry_attempts, 5);
      assert.equal(a.use_lane, true);
      assert.equal(a.enabled, true);
      assert.equal(a.paused, false);
      assert.deepEqual(a.secret_names, []);
      for (const f of ['forward_method', 'forward_headers', 'forward_body', 'on_failure_url', 'on_recovery_url', 'notify_on_failure', 'notify_on_recovery', 'script']) {
        assert.equal(a[f], null, f);
      }
      const b = await create({ name: 'second', forward_urls: [`${target.url}/never/b`], forward_method: '', forward_body: '', forward_headers: {} });
      assert.equal(b.forward_method, null, "'' means the original method");
      assert.equal(b.forward_body, null, "'' means the original body");
      assert.equal(b.forward_headers, null, '{} means the original headers');
      const c = await create({ name: 'third', forward_urls: [`${target.url}/never/c`], enabled: false });

      const list = await api('GET', '/endpoints');
      assert.equal(list.status, 200);
      assert.deepEqual(Object.keys(list.body), ['data']);
      const ids = list.body.data.map((e: any) => e.id);
      const mine = ids.filter((id: string) => [a.id, b.id, c.id].includes(id));
      assert.deepEqual(mine, [c.id, b.id, a.id], 'newest first');
      const listedC = list.body.data.find((e: any) => e.id === c.id);
      assert.deepEqual(listedC, c, 'list rows are the same resource');

      await sleep(5); // a later updated_at (a clock reading, which a slow machine only makes later)
      const put = await api('PUT', `/endpoints/${b.id}`, { retry_attempts: 0, forward_method: 'PATCH', forward_headers: { 'X-A': '1' }, forward_body: 'x' });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.deepEqual(Object.keys(put.body), ['data']);
      const b2 = put.body.data;
      assert.equal(b2.retry_attempts, 0);
      assert.equal(b2.forward_method, 'PATCH');
      assert.deepEqual(b2.forward_headers, { 'X-A': '1' });
      assert.equal(b2.forward_body, 'x');
      assert.equal(b2.name, 'second', 'fields not sent are kept');
      assert.deepEqual(b2.forward_urls, b.forward_urls);
      assert.equal(b2.slug, b.slug, 'the slug never changes');
      assert.equal(b2.inbound_url, b.inbound_url);
      assert.equal(b2.created_at, b.created_at);
      assert.ok(b2.updated_at > b.updated_at, 'updated_at moves');

      const cleared = (await api('PUT', `/endpoints/${b.id}`, { forward_method: '', forward_headers: {}, forward_body: '' })).body.data;
      assert.equal(cleared.forward_method, null);
      assert.equal(cleared.forward_headers, null);
      assert.equal(cleared.forward_body, null);
      assert.equal(cleared.retry_attempts, 0, 'kept');
      const nulled = (await api('PUT', `/endpoints/${b.id}`, { forward_method: 'GET', on_failure_url: `${target.url}/f` })).body.data;
      assert.equal(nulled.forward_method, 'GET');
      const back = (await api('PUT', `/endpoints/${b.id}`, { forward_method: null, on_failure_url: null, forward_urls: [] })).body.data;
      assert.equal(back.forward_method, null);
      assert.equal(back.on_failure_url, null);
      assert.deepEqual(back.forward_urls, []);
      assert.deepEqual((await api('GET', `/endpoints/${b.id}`)).body.data, back, 'GET shows what PUT answered');
    });

    test('secrets: PUT replaces the set, null clears it, omitted keeps it', async () => {
      const ep = await create({ name: 'secrets', secrets: { ZETA: '1', alpha: '2', Mid_1: '3' } });
      assert.deepEqual(ep.secret_names, [...['ZETA', 'alpha', 'Mid_1']].sort());
      const replaced = await api('PUT', `/endpoints/${ep.id}`, { secrets: { NEW_ONE: 'n' } });
      assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
      assert.deepEqual(replaced.body.data.secret_names, ['NEW_ONE']);
      assert.ok(!('secrets' in replaced.body.data));
      const kept = (await api('PUT', `/endpoints/${ep.id}`, { retry_attempts: 2 })).body.data;
      assert.deepEqual(kept.secret_names, ['NEW_ONE']);
      const cleared = await api('PUT', `/endpoints/${ep.id}`, { secrets: null });
      assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
      assert.deepEqual(cleared.body.data.secret_names, []);
      assert.deepEqual((await api('GET', `/endpoints/${ep.id}`)).body.data.secret_names, []);
    });

    test('pause and resume answer 200 {data} with paused; DELETE → 204 then 404', async () => {
      const ep = await create({ name: 'lifecycle' });
      const paused = await api('POST', `/endpoints/${ep.id}/pause`);
      assert.equal(paused.status, 200, JSON.stringify(paused.body));
      assert.deepEqual(Object.keys(paused.body), ['data']);
      assert.equal(paused.body.data.paused, true);
      assert.equal(paused.body.data.id, ep.id);
      assert.equal((await api('GET', `/endpoints/${ep.id}`)).body.data.paused, true);
      const resumed = await api('POST', `/endpoints/${ep.id}/resume`);
      assert.equal(resumed.status, 200);
      assert.equal(resumed.body.data.paused, false);
      assert.equal((await api('GET', `/endpoints/${ep.id}`)).body.data.paused, false);

      const del = await api('DELETE', `/endpoints/${ep.id}`);
      assert.equal(del.status, 204);
      assert.equal(del.body, null, 'empty body');
      assertError(await api('GET', `/endpoints/${ep.id}`), 404, null);
      assert.ok(!(await api('GET', '/endpoints')).body.data.some((e: any) => e.id === ep.id));
      assertError(await api('PUT', `/endpoints/${ep.id}`, { name: 'x' }), 404, null);
      assertError(await api('DELETE', `/endpoints/${ep.id}`), 404, null);
      assertError(await api('POST', `/endpoints/${ep.id}/pause`), 404, null);
      assertError(await inbound(ep.inbound_url, { method: 'POST', body: 'x' }), 404, null);
      // Unknown ids, well-formed or not.
      assertError(await api('GET', '/endpoints/ep_0000000000000000000000'), 404, null);
      assertError(await api('GET', '/endpoints/nope'), 404, null);
      assertError(await api('PUT', '/endpoints/nope', { name: 'x' }), 404, null);
      assertError(await api('POST', '/endpoints/tsk_0000000000000000000000/resume'), 404, null);
    });
  });

  describe('validation', () => {
    test('400 for a body that is not a JSON object', async () => {
      assertError(await api('POST', '/endpoints', '{"name": '), 400, null);
      assertError(await api('POST', '/endpoints', '[{"name":"a"}]'), 400, null);
      assertError(await api('POST', '/endpoints', '"a"'), 400, null);
      assertError(await api('POST', '/endpoints', 'name=a', { 'Content-Type': 'application/x-www-form-urlencoded' }), 400, null);
      const ep = await create({ name: 'put-400' });
      assertError(await api('PUT', `/endpoints/${ep.id}`, '{nope'), 400, null);
    });

    test('422 with the offending field', async () => {
      const u = (p: string) => `${target.url}/v/${p}`;
      const cases: [Record<string, unknown>, string | RegExp][] = [
        [{ name: 'a', retry_attemps: 3 }, 'retry_attemps'],
        [{}, 'name'],
        [{ name: '' }, 'name'],
        [{ name: 5 }, 'name'],
        [{ name: 'n'.repeat(256) }, 'name'],
        [{ name: 'a', retry_attempts: 11 }, 'retry_attempts'],
        [{ name: 'a', retry_attempts: -1 }, 'retry_attempts'],
        [{ name: 'a', retry_attempts: 1.5 }, 'retry_attempts'],
        [{ name: 'a', forward_urls: Array.from({ length: 11 }, (_, i) => u(String(i))) }, 'forward_urls'],
        [{ name: 'a', forward_urls: ['ftp://example.com/x'] }, 'forward_urls[0]'],
        [{ name: 'a', forward_urls: [u('ok'), 'not a url'] }, 'forward_urls[1]'],
        [{ name: 'a', forward_urls: [u('same'), u('same')] }, /^forward_urls(\[1\])?$/],
        [{ name: 'a', forward_urls: u('x') }, 'forward_urls'],
        [{ name: 'a', forward_method: 'HEAD' }, 'forward_method'],
        [{ name: 'a', forward_method: 'post' }, 'forward_method'],
        [{ name: 'a', use_lane: 'yes' }, 'use_lane'],
        [{ name: 'a', enabled: 1 }, 'enabled'],
        [{ name: 'a', on_failure_url: 'mailto:x@example.com' }, 'on_failure_url'],
        [{ name: 'a', notify_on_recovery: 'sometimes' }, 'notify_on_recovery'],
        [{ name: 'a', secrets: { 'bad-name': 'x' } }, /^secrets/],
        [{ name: 'a', secrets: { 'has space': 'x' } }, /^secrets/],
        [{ name: 'a', secrets: { GOOD: 5 } }, /^secrets/],
        [{ name: 'a', forward_body: 'x'.repeat(262_145) }, 'forward_body'],
        // Under the limit in characters, over it in UTF-8 bytes.
        [{ name: 'a', forward_body: 'é'.repeat(131_073) }, 'forward_body'],
        [{ name: 'a', forward_headers: { 'X-Jetcron-Signature': 'forged' } }, 'forward_headers.X-Jetcron-Signature'],
        [{ name: 'a', forward_headers: { 'Content-Length': '5' } }, 'forward_headers.Content-Length'],
        [{ name: 'a', forward_headers: { 'transfer-encoding': 'chunked' } }, 'forward_headers.transfer-encoding'],
        [{ name: 'a', forward_headers: { 'X-Ok': 'line\r\nInjected: 1' } }, 'forward_headers.X-Ok'],
        [{ name: 'a', forward_headers: { 'X-Num': 5 } }, /^forward_headers/],
      ];
      for (const [body, field] of cases) {
        const res = await api('POST', '/endpoints', body);
        assertError(res, 422, field);
      }
      // Exactly 256 KB is allowed; 10 forward URLs are allowed.
      const big = await api('POST', '/endpoints', { name: 'limits', forward_body: 'x'.repeat(262_144), forward_urls: Array.from({ length: 10 }, (_, i) => u(String(i))) });
      assert.equal(big.status, 201, JSON.stringify(big.body));
      assert.equal(big.body.data.forward_urls.length, 10);
      assert.equal(big.body.data.forward_body.length, 262_144);

      // The same rules on PUT, and nothing changes.
      const ep = await create({ name: 'put-rules', forward_urls: [u('p1')] });
      for (const [body, field] of [
        [{ retry_attemps: 1 }, 'retry_attemps'],
        [{ name: '' }, 'name'],
        [{ retry_attempts: 11 }, 'retry_attempts'],
        [{ forward_urls: [u('p1'), u('p1')] }, /^forward_urls(\[1\])?$/],
        [{ forward_method: 'HEAD' }, 'forward_method'],
        [{ forward_headers: { 'x-jetcron-timestamp': '1' } }, 'forward_headers.x-jetcron-timestamp'],
        [{ forward_body: 'é'.repeat(131_073) }, 'forward_body'],
        [{ slug: 'ep_00000000000000000000000000000000' }, 'slug'],
        [{ id: 'ep_x' }, 'id'],
      ] as [Record<string, unknown>, string | RegExp][]) {
        assertError(await api('PUT', `/endpoints/${ep.id}`, body), 422, field);
      }
      const after = (await api('GET', `/endpoints/${ep.id}`)).body.data;
      assert.deepEqual(after, ep, 'a refused PUT changes nothing');
    });
  });

  describe('plans', () => {
    test('Free: no script or secrets (403 with the field), at most 3 endpoints; deleting one frees a place', async () => {
      assertError(await free('POST', '/endpoints', { name: 'lua', script: 'function filter(req) return true end' }), 403, 'script');
      assertError(await free('POST', '/endpoints', { name: 'sec', secrets: { TOKEN: 'x' } }), 403, 'secrets');
      const made = [];
      for (let i = 0; i < 3; i++) made.push(await create({ name: `free-${i}`, secrets: {} }, free));
      const fourth = await free('POST', '/endpoints', { name: 'free-4' });
      assertError(fourth, 403, null);
      assert.equal((await free('GET', '/endpoints')).body.data.length, 3);
      // Plan rules on PUT too.
      assertError(await free('PUT', `/endpoints/${made[0].id}`, { script: 'function filter(req) return true end' }), 403, 'script');
      assertError(await free('PUT', `/endpoints/${made[0].id}`, { secrets: { TOKEN: 'x' } }), 403, 'secrets');
      assert.equal((await free('PUT', `/endpoints/${made[0].id}`, { secrets: null })).status, 200, 'clearing secrets is allowed');

      assert.equal((await free('DELETE', `/endpoints/${made[1].id}`)).status, 204);
      await create({ name: 'free-again' }, free);
      assertError(await free('POST', '/endpoints', { name: 'free-5' }), 403, null);
      for (const e of (await free('GET', '/endpoints')).body.data) assert.equal((await free('DELETE', `/endpoints/${e.id}`)).status, 204);
    });

    // The limit is checked against the read model's count before appending, with nothing
    // serializing one organization's creates: parallel POSTs all see the same count.
    test('Free: concurrent creates do not get past the limit of 3', async () => {
      const org = (await svc.createOrg('free')).api;
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => org('POST', '/endpoints', { name: `race-${i}` })));
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [201, 201, 201, 403, 403, 403], `statuses ${statuses.join(',')}`);
      assert.equal((await org('GET', '/endpoints')).body.data.length, 3);
    });

    test('Pro: no endpoint limit', async () => {
      const org = (await svc.createOrg('pro')).api;
      for (let i = 0; i < 5; i++) await create({ name: `pro-${i}` }, org);
      assert.equal((await org('GET', '/endpoints')).body.data.length, 5);
    });
  });

  test("another organization's endpoint is 404 everywhere", async () => {
    const ep = await create({ name: 'private', forward_urls: [`${target.url}/private`] });
    const sent = await inbound(ep.inbound_url, { method: 'POST', body: 'private' });
    assert.equal(sent.status, 200);
    await listed(ep.id, sent.body.id);
    for (const [method, path, body] of [
      ['GET', `/endpoints/${ep.id}`],
      ['PUT', `/endpoints/${ep.id}`, { name: 'stolen' }],
      ['DELETE', `/endpoints/${ep.id}`],
      ['POST', `/endpoints/${ep.id}/pause`],
      ['POST', `/endpoints/${ep.id}/resume`],
      ['GET', `/endpoints/${ep.id}/events`],
      ['GET', `/endpoints/${ep.id}/events/${sent.body.id}`],
      ['POST', `/endpoints/${ep.id}/events/${sent.body.id}/replay`],
    ] as [string, string, unknown?][]) {
      assertError(await other(method, path, body), 404, null);
    }
    assert.ok(!(await other('GET', '/endpoints')).body.data.some((e: any) => e.id === ep.id));
    const mine = (await api('GET', `/endpoints/${ep.id}`)).body.data;
    assert.equal(mine.name, 'private', 'untouched');
    assert.equal(mine.paused, false);
    assert.equal((await events(ep.id)).length, 1);
  });

  describe('inbound URL', () => {
    test('GET, POST, PUT, PATCH, DELETE → 200 received, no API key; HEAD and OPTIONS → 405', async () => {
      const ep = await create({ name: 'methods' });
      const ids: string[] = [];
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
        const res = await inbound(ep.inbound_url, { method, ...(method === 'GET' ? {} : { body: `m=${method}` }) });
        assert.equal(res.status, 200, `${method}: ${JSON.stringify(res.body)}`);
        assert.deepEqual(Object.keys(res.body).sort(), ['id', 'status']);
        assert.match(res.body.id, /^evt_[0-9a-z]+$/);
        assert.equal(res.body.status, 'received');
        ids.push(res.body.id);
      }
      assert.equal(new Set(ids).size, 5);
      // A bogus API key does not matter: the slug is the credential.
      const withKey = await inbound(ep.inbound_url, { method: 'POST', body: 'k', headers: { Authorization: 'Bearer pk_nope.sk_nope' } });
      assert.equal(withKey.status, 200);
      ids.push(withKey.body.id);
      for (const method of ['HEAD', 'OPTIONS']) {
        const res = await inbound(ep.inbound_url, { method });
        assert.equal(res.status, 405, method);
      }
      const rows = await eventually(async () => {
        const r = await events(ep.id);
        return r.length >= 6 ? r : null;
      });
      assert.deepEqual(rows.map((e) => e.id), [...ids].reverse(), 'newest first, and HEAD/OPTIONS stored nothing');
      assert.deepEqual(rows.map((e) => e.method), ['POST', 'DELETE', 'PATCH', 'PUT', 'POST', 'GET']);
      // A request stored after HEAD and OPTIONS is listed next to the six: they stored nothing.
      const marker = await inbound(ep.inbound_url, { method: 'POST', body: 'after' });
      assert.equal(marker.status, 200);
      const withMarker = await eventually(async () => {
        const r = await events(ep.id);
        return r.some((e) => e.id === marker.body.id) ? r : null;
      });
      assert.deepEqual(withMarker.map((e) => e.id), [marker.body.id, ...[...ids].reverse()]);
    });

    test('unknown slug, well-formed or not → 404 {error: {message: "Not found"}}', async () => {
      for (const path of [`/in/ep_${'0'.repeat(32)}`, '/in/nope', '/in/ep_short', `/in/ep_${'A'.repeat(32)}`, '/in/', '/in/a/b']) {
        for (const method of ['GET', 'POST']) {
          const res = await inbound(`${svc.url}${path}`, { method, ...(method === 'POST' ? { body: 'x' } : {}) });
          assertError(res, 404, null);
          assert.equal(res.body.error.message, 'Not found', path);
        }
      }
    });

    test('disabled → 503 "Endpoint disabled", nothing stored; re-enabled → 200', async () => {
      const ep = await create({ name: 'toggle' });
      const off = await api('PUT', `/endpoints/${ep.id}`, { enabled: false });
      assert.equal(off.body.data.enabled, false);
      for (const method of ['GET', 'POST']) {
        const res = await inbound(ep.inbound_url, { method, ...(method === 'POST' ? { body: 'while disabled' } : {}) });
        assertError(res, 503, null);
        assert.equal(res.body.error.message, 'Endpoint disabled');
      }
      assert.equal((await api('PUT', `/endpoints/${ep.id}`, { enabled: true })).body.data.enabled, true);
      const res = await inbound(ep.inbound_url, { method: 'POST', body: 'back' });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'received');
      const rows = await listed(ep.id, res.body.id);
      assert.deepEqual(rows.map((e) => e.id), [res.body.id], 'the refused requests were not stored');
    });

    test('paused → 200 queued, held until resume, then forwarded', async () => {
      const ep = await create({ name: 'hold', forward_urls: [`${target.url}/held`] });
      assert.equal((await api('POST', `/endpoints/${ep.id}/pause`)).body.data.paused, true);
      const res = await inbound(ep.inbound_url, { method: 'POST', body: 'held body' });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'queued');
      const rows = await listed(ep.id, res.body.id);
      assert.equal(rows[0].executions.length, 1, 'an execution exists, held');
      const orgId = (await api('GET', '/organization')).body.data.id;
      await eventually(async () => (await heldCount(svc.natsUrl, orgId, ep.id)) === 1);
      assert.equal(hits('/held').length, 0, 'nothing forwarded while paused');
      assert.equal((await api('POST', `/endpoints/${ep.id}/resume`)).body.data.paused, false);
      await eventually(async () => hits('/held').length === 1);
      assert.equal(hits('/held')[0]!.body, 'held body');
      const after = await inbound(ep.inbound_url, { method: 'POST', body: 'x' });
      assert.equal(after.body.status, 'received');
      // Forwarded before the next test counts what the target received.
      await eventually(async () => hits('/held').length === 2);
    });

    test('body of exactly 1 MiB accepted; 1 MiB + 1 → 413, nothing stored (Content-Length and chunked)', async () => {
      const ep = await create({ name: 'sizes' });
      const exact = Buffer.alloc(MIB, 0x61);
      const ok = await inbound(ep.inbound_url, { method: 'POST', body: exact, headers: { 'Content-Type': 'text/plain' } });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const before = await listed(ep.id, ok.body.id);
      assert.equal(before.length, 1);
      const detail = (await api('GET', `/endpoints/${ep.id}/events/${ok.body.id}`)).body.data;
      assert.equal(detail.request.body.length, MIB);
      assert.ok(Buffer.from(detail.request.body, 'utf8').equals(exact));

      // Declared too large: answered from the headers alone.
      const declared = await rawRequest(ep.inbound_url, { method: 'POST', headers: { 'Content-Length': String(MIB + 1) }, headersOnly: true });
      assertError(declared, 413, null);
      // Sent in full with a Content-Length, as fetch does.
      const full = await inbound(ep.inbound_url, { method: 'PUT', body: Buffer.alloc(MIB + 1, 0x62) });
      assertError(full, 413, null);
      // Chunked, no Content-Length: the limit is counted while reading.
      const pieces = Array.from({ length: 16 }, () => Buffer.alloc(MIB / 16, 0x63));
      pieces.push(Buffer.from('d'));
      const chunked = await rawRequest(ep.inbound_url, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, chunks: pieces });
      assertError(chunked, 413, null);
      // A chunked body of exactly 1 MiB is fine.
      const chunkedOk = await rawRequest(ep.inbound_url, { method: 'PATCH', chunks: Array.from({ length: 4 }, () => Buffer.alloc(MIB / 4, 0x65)) });
      assert.equal(chunkedOk.status, 200, JSON.stringify(chunkedOk.body));

      const rows = await settled(ep);
      assert.deepEqual(rows.map((e) => e.method), ['POST', 'PATCH', 'POST'], 'the 413s stored nothing');
      assert.equal(rows[1].id, chunkedOk.body.id);
      const big = (await api('GET', `/endpoints/${ep.id}/events/${chunkedOk.body.id}`)).body.data.request;
      assert.equal(big.body.length, MIB);
    });
  });

  describe('inbound events', () => {
    test('rows, newest first; limit 1-100, default 50', async () => {
      const ep = await create({ name: 'many' });
      const ids: string[] = [];
      for (let i = 0; i < 53; i++) {
        const res = await inbound(`${ep.inbound_url}?n=${i}`, { method: 'POST', body: String(i) });
        assert.equal(res.status, 200);
        ids.push(res.body.id);
      }
      const all = await eventually(async () => {
        const r = await events(ep.id, '?limit=100');
        return r.length >= 53 ? r : null;
      });
      assert.equal(all.length, 53);
      assert.deepEqual(all.map((e) => e.id), [...ids].reverse(), 'newest first');
      assert.equal((await events(ep.id)).length, 50, 'default 50');
      assert.deepEqual((await events(ep.id)).map((e) => e.id), all.slice(0, 50).map((e) => e.id));
      const one = await events(ep.id, '?limit=1');
      assert.deepEqual(one.map((e) => e.id), [ids.at(-1)]);
      assert.equal((await events(ep.id, '?limit=100')).length, 53);

      const row = all[0];
      for (const f of ['id', 'method', 'source_ip', 'received_at', 'execution_id', 'execution_status', 'executions']) assert.ok(f in row, `missing ${f}`);
      assert.equal(row.method, 'POST');
      assert.equal(row.source_ip, '127.0.0.1');
      assert.match(row.received_at, ISO);
      assert.equal(row.execution_id, null, 'collect-only: no execution');
      assert.equal(row.execution_status, null);
      assert.deepEqual(row.executions, []);

      for (const q of ['?limit=0', '?limit=101', '?limit=-1']) assertError(await api('GET', `/endpoints/${ep.id}/events${q}`), 422, 'limit');
      for (const q of ['?limit=abc', '?limit=1.5']) assertError(await api('GET', `/endpoints/${ep.id}/events${q}`), 400, 'limit');
      assertError(await api('GET', '/endpoints/ep_0000000000000000000000/events'), 404, null);
    });

    test('one event: the stored request byte-exact (utf8 and base64), source IP, 404s', async () => {
      const ep = await create({ name: 'detail' });
      const text = 'héllo ✓ {"a":1}';
      const utf8 = await inbound(`${ep.inbound_url}?x=1&y=two%20words`, {
        method: 'PUT',
        body: text,
        headers: { 'Content-Type': 'application/json; charset=utf-8', 'X-Hub-Signature': 'sha256=abc', 'X-Forwarded-For': '203.0.113.9' },
      });
      assert.equal(utf8.status, 200);
      const binary = Buffer.from([0xff, 0x00, 0xfe, 0x41, 0x80, 0x0a, 0xc3]);
      const bin = await inbound(ep.inbound_url, { method: 'POST', body: binary, headers: { 'Content-Type': 'application/octet-stream' } });
      const empty = await inbound(`${ep.inbound_url}/`, { method: 'DELETE' });
      assert.equal(empty.status, 200, 'a trailing slash is the same inbound URL');
      await listed(ep.id, empty.body.id);

      const one = await api('GET', `/endpoints/${ep.id}/events/${utf8.body.id}`);
      assert.equal(one.status, 200, JSON.stringify(one.body));
      const d = one.body.data;
      assert.equal(d.id, utf8.body.id);
      assert.equal(d.method, 'PUT');
      assert.equal(d.source_ip, '203.0.113.9', 'a loopback proxy’s X-Forwarded-For is believed');
      assert.equal(d.request.method, 'PUT');
      assert.equal(d.request.path, `/in/${ep.slug}`);
      assert.equal(d.request.query, 'x=1&y=two%20words');
      assert.equal(d.request.body_encoding, 'utf8');
      assert.equal(d.request.body, text);
      const headers = Object.fromEntries(Object.entries(d.request.headers).map(([k, v]) => [k.toLowerCase(), v]));
      assert.equal(headers['x-hub-signature'], 'sha256=abc');
      assert.equal(headers['content-type'], 'application/json; charset=utf-8');

      const b = (await api('GET', `/endpoints/${ep.id}/events/${bin.body.id}`)).body.data;
      assert.equal(b.request.body_encoding, 'base64');
      assert.ok(Buffer.from(b.request.body, 'base64').equals(binary), 'byte-exact after base64 decoding');
      assert.equal(b.source_ip, '127.0.0.1');

      const e = (await api('GET', `/endpoints/${ep.id}/events/${empty.body.id}`)).body.data;
      assert.equal(e.request.method, 'DELETE');
      assert.equal(e.request.body, '');
      assert.equal(e.request.query, '');

      // An event is found only under its own endpoint.
      const another = await create({ name: 'detail-2' });
      assertError(await api('GET', `/endpoints/${another.id}/events/${utf8.body.id}`), 404, null);
      assertError(await api('GET', `/endpoints/${ep.id}/events/evt_0000000000000000000000`), 404, null);
      assertError(await api('GET', `/endpoints/${ep.id}/events/nope`), 404, null);

      // Deleting the endpoint deletes its events.
      assert.equal((await api('DELETE', `/endpoints/${ep.id}`)).status, 204);
      assertError(await api('GET', `/endpoints/${ep.id}/events`), 404, null);
      assertError(await api('GET', `/endpoints/${ep.id}/events/${utf8.body.id}`), 404, null);
      assertError(await api('POST', `/endpoints/${ep.id}/events/${utf8.body.id}/replay`), 404, null);
    });

    test('collect-only: stores events, forwards nothing, replay → 422', async () => {
      const before = target.received.length;
      const ep = await create({ name: 'collect' });
      const res = await inbound(ep.inbound_url, { method: 'POST', body: 'keep me', headers: { 'Content-Type': 'text/plain' } });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'received');
      const rows = await listed(ep.id, res.body.id);
      assert.equal(rows[0].execution_id, null);
      assert.deepEqual(rows[0].executions, []);
      const replay = await api('POST', `/endpoints/${ep.id}/events/${res.body.id}/replay`);
      assertError(replay, 422, 'forward_urls');
      assert.deepEqual((await events(ep.id))[0].executions, []);

      // Given a forward URL later, it forwards new events, and the old one on replay.
      await api('PUT', `/endpoints/${ep.id}`, { forward_urls: [`${target.url}/late`] });
      const later = await inbound(ep.inbound_url, { method: 'POST', body: 'forward me' });
      assert.equal(later.status, 200);
      await eventually(async () => hits('/late').length === 1);
      assert.equal(hits('/late')[0]!.body, 'forward me');
      assert.equal(target.received.length, before + 1, `before a forward URL, nothing was sent anywhere: ${target.received.slice(before).map((r) => r.path).join(', ')}`);
      const replayed = await api('POST', `/endpoints/${ep.id}/events/${res.body.id}/replay`);
      assert.equal(replayed.status, 202, JSON.stringify(replayed.body));
      await eventually(async () => hits('/late').length === 2);
      assert.equal(hits('/late')[1]!.body, 'keep me');
    });

    test('forwarding endpoint: one execution per forward URL, listed; replay → 202 new executions', async () => {
      const ep = await create({ name: 'fwd', forward_urls: [`${target.url}/fwd/a`, `${target.url}/fwd/b`], forward_headers: { 'X-Extra': '1' } });
      const bin = Buffer.from([0xff, 0x00, 0xfe, 0x41]);
      const res = await inbound(`${ep.inbound_url}?x=1`, { method: 'POST', body: bin, headers: { 'Content-Type': 'application/octet-stream', 'X-Hub': 'abc' } });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'received');
      await eventually(async () => hits('/fwd/').length >= 2);
      for (const r of hits('/fwd/')) {
        assert.equal(r.method, 'POST');
        assert.ok(r.raw.equals(bin), 'the original bytes are forwarded');
        assert.equal(r.headers['x-hub'], 'abc');
        assert.equal(r.headers['x-extra'], '1');
      }
      const rows = await eventually(async () => {
        const r = await events(ep.id);
        return r[0]?.executions?.length === 2 && r[0].executions.every((x: any) => x.status === 'success') ? r : null;
      });
      const row = rows[0];
      assert.equal(row.id, res.body.id);
      assert.deepEqual(row.executions.map((x: any) => x.url), [`${target.url}/fwd/a`, `${target.url}/fwd/b`]);
      for (const x of row.executions) assert.match(x.id, /^exe_/);
      assert.equal(row.execution_id, row.executions[0].id, 'execution_id names the first forward URL’s execution');
      assert.equal(row.execution_status, 'success');

      const replay = await api('POST', `/endpoints/${ep.id}/events/${res.body.id}/replay`);
      assert.equal(replay.status, 202, JSON.stringify(replay.body));
      assert.equal(typeof replay.body.message, 'string');
      const newIds: string[] = replay.body.data.execution_ids;
      assert.equal(newIds.length, 2);
      for (const id of newIds) assert.ok(!row.executions.some((x: any) => x.id === id), 'new executions');
      await eventually(async () => hits('/fwd/').length >= 4);
      for (const r of hits('/fwd/').slice(2)) assert.ok(r.raw.equals(bin), 'the original payload again');
      const exe = await eventually(async () => {
        const x = (await api('GET', `/executions/${newIds[0]}`)).body?.data;
        return x?.status === 'success' ? x : null;
      });
      assert.equal(exe.task.type, 'endpoint');
      assert.equal(exe.task.url, `${target.url}/fwd/a`);
      assert.equal((await events(ep.id)).length, 1, 'a replay is not a new inbound event');
    });
  });
});
