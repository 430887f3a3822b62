import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService } from './support/service.ts';
import { rawRequest } from './support/raw-http.ts';

// `POST /api/v1/tasks` is taken ahead of express (src/http/task-receiver.ts). The same
// request sent to `/api/v1/tasks?` goes through express's route instead: every answer
// must be the same either way (status, error body, the headers a client reads).

const KEPT = ['content-type', 'ratelimit-limit', 'ratelimit-remaining', 'retry-after', 'connection'];

describe('task creates ahead of express answer as the express route does', () => {
  let svc: TestService;
  let key: string;
  let limitedKey: string;
  before(async () => {
    svc = await startTestService({ JETCRON_RATE_LIMIT_FREE: '2', JETCRON_RATE_LIMIT_PRO: '0' });
    key = (await svc.createOrg('pro')).apiKey;
    limitedKey = (await svc.createOrg('free')).apiKey;
  });
  after(async () => {
    await svc?.stop();
  });

  const send = async (path: string, opts: { auth?: string | null; type?: string | null; body?: string | Buffer; headers?: Record<string, string> }) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.auth !== null) headers.Authorization = opts.auth ?? `Bearer ${key}`;
    if (opts.type !== null) headers['Content-Type'] = opts.type ?? 'application/json';
    const res = await rawRequest(svc.url, { method: 'POST', path, headers, ...(opts.body !== undefined ? { body: opts.body } : {}) });
    const kept = Object.fromEntries(KEPT.filter((h) => res.headers[h] !== undefined).map((h) => [h, String(res.headers[h])]));
    return { status: res.status, headers: kept, body: res.body ?? res.text };
  };
  /** The answer of both paths, with what differs by nature (new ids, times, remaining quota) taken out. */
  const both = async (opts: Parameters<typeof send>[1]) => {
    const strip = (a: Awaited<ReturnType<typeof send>>) => {
      const data = a.body?.data;
      const { ['ratelimit-remaining']: _remaining, ...headers } = a.headers;
      return { status: a.status, headers, body: data ? { ...a.body, data: { ...data, id: 'ID', last_execution_id: 'ID', next_run_at: 'T', created_at: 'T', updated_at: 'T' } } : a.body };
    };
    const fast = await send('/api/v1/tasks', opts);
    const routed = await send('/api/v1/tasks?', opts);
    assert.deepEqual(strip(fast), strip(routed));
    return fast;
  };

  test('a create: 201 with the task, as express answers it', async () => {
    const ok = await both({ body: JSON.stringify({ url: 'https://example.com/hook', name: 'n', delay: '1h', headers: { 'X-A': '1' } }) });
    assert.equal(ok.status, 201);
    assert.match(ok.body.data.id, /^tsk_/);
    assert.equal(ok.body.data.status, 'pending');
    assert.equal(ok.headers['content-type'], 'application/json; charset=utf-8');
  });

  test('every refusal of a create: the same status, message and field', async () => {
    const cases: Array<[number, Parameters<typeof send>[1]]> = [
      [401, { auth: null, body: '{}' }],
      [401, { auth: 'Bearer pk_nope.sk_nope', body: '{}' }],
      [400, { body: '{"url":' }],
      [400, { body: '[1,2]' }],
      [400, {}],
      [400, { body: Buffer.from([0x7b, 0xff, 0x7d]) }],
      [415, { type: 'application/json; charset=latin1', body: '{}' }],
      [422, { body: JSON.stringify({ url: 'ftp://example.com' }) }],
      [422, { body: JSON.stringify({ url: 'https://example.com', surprise: 1 }) }],
      [422, { body: JSON.stringify({ url: 'https://example.com', delay: '1h', run_at: new Date().toISOString() }) }],
      [413, { body: JSON.stringify({ url: 'https://example.com', body: 'x'.repeat(1024 * 1024) }) }],
    ];
    for (const [status, opts] of cases) {
      const a = await both(opts);
      assert.equal(a.status, status, JSON.stringify(a.body));
      assert.equal(typeof a.body.error.message, 'string');
    }
  });

  test('the rate limit: headers on every answer, then 429 with Retry-After', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const a = await send('/api/v1/tasks', { auth: `Bearer ${limitedKey}`, body: JSON.stringify({ url: 'https://example.com', delay: '1h' }) });
      statuses.push(a.status);
      assert.equal(a.headers['ratelimit-limit'], '4');
      if (a.status === 429) {
        assert.ok(Number(a.headers['retry-after']) >= 1);
        assert.equal(a.body.error.message, 'Rate limit exceeded');
      }
    }
    assert.ok(statuses.includes(201) && statuses.includes(429), statuses.join(','));
  });

  test('what the receiver leaves to express still works: an Idempotency-Key replays, a gzip body is read', async () => {
    const body = JSON.stringify({ url: 'https://example.com/once', delay: '1h' });
    const first = await send('/api/v1/tasks', { body, headers: { 'Idempotency-Key': 'receiver-once' } });
    const again = await send('/api/v1/tasks', { body, headers: { 'Idempotency-Key': 'receiver-once' } });
    assert.equal(first.status, 201);
    assert.equal(again.body.data.id, first.body.data.id);
    const { gzipSync } = await import('node:zlib');
    const gz = await send('/api/v1/tasks', { body: gzipSync(body), headers: { 'Content-Encoding': 'gzip' } });
    assert.equal(gz.status, 201, JSON.stringify(gz.body));
  });

  test('the metrics count creates taken ahead of express under the route express names', async () => {
    const before = await (await fetch(`${svc.url}/metrics`)).text();
    const count = (text: string) => Number(/jetcron_http_requests_total\{method="POST",route="\/tasks",status="201"\} (\d+)/.exec(text)?.[1] ?? 0);
    assert.equal((await send('/api/v1/tasks', { body: JSON.stringify({ url: 'https://example.com', delay: '1h' }) })).status, 201);
    const after = await (await fetch(`${svc.url}/metrics`)).text();
    assert.equal(count(after), count(before) + 1);
  });
});
