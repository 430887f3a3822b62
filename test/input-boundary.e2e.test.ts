// Issue 9: one regression test per class of hostile input that used to answer 500 or
// wedge the projector. Each asserts the contract's status and `field`.
import assert from 'node:assert/strict';
import { gzipSync, deflateRawSync, deflateSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { rawExchange, rawRequest, type RawResponse } from './support/raw-http.ts';

const URL_OK = 'http://127.0.0.1:9/hook';

describe('input boundary', () => {
  let svc: TestService;
  let api: Api;
  let apiKey: string;

  before(async () => {
    svc = await startTestService();
    const org = await svc.createOrg('pro');
    api = org.api;
    apiKey = org.apiKey;
  });
  after(() => svc?.stop());

  const send = (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}) =>
    rawRequest(svc.url, {
      method,
      path: path.startsWith('/api/') || path.startsWith('/ping') || path.startsWith('/in/') ? path : `/api/v1${path}`,
      headers: { Authorization: `Bearer ${apiKey}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      body,
    });
  const assertError = (res: { status: number; body: any; text?: string }, status: number, field: string | null) => {
    assert.equal(res.status, status, res.text ?? JSON.stringify(res.body));
    assert.deepEqual(Object.keys(res.body), ['error'], JSON.stringify(res.body));
    assert.ok(typeof res.body.error.message === 'string' && res.body.error.message.length > 0);
    assert.equal(res.body.error.field, field, res.body.error.message);
  };
  const task = (extra: Record<string, unknown> = {}) => JSON.stringify({ url: URL_OK, delay: '1h', ...extra });
  // Still serving and projecting: a create answers with the projected row and reads back at once.
  const stillWorks = async () => {
    const created = await api('POST', '/tasks', { url: URL_OK, delay: '1h', name: 'after' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const read = await api('GET', `/tasks/${created.body.data.id}`);
    assert.equal(read.status, 200, 'read back at once');
  };

  describe('Content-Encoding', () => {
    for (const coding of ['br', 'compress', 'gzip, gzip', 'identity, gzip', 'zstd']) {
      test(`${coding} → 415`, async () => {
        assertError(await send('POST', '/tasks', task(), { 'Content-Encoding': coding }), 415, null);
      });
    }
    test('a gzip or deflate body that is garbage → 400', async () => {
      assertError(await send('POST', '/tasks', Buffer.from('not gzip at all'), { 'Content-Encoding': 'gzip' }), 400, null);
      assertError(await send('POST', '/tasks', Buffer.from([0x78, 0x9c, 1, 2, 3, 4]), { 'Content-Encoding': 'deflate' }), 400, null);
      const truncated = gzipSync(task()).subarray(0, 12);
      assertError(await send('POST', '/tasks', truncated, { 'Content-Encoding': 'gzip' }), 400, null);
    });
    test('gzip, zlib deflate and raw deflate bodies are accepted', async () => {
      for (const [coding, bytes] of [['gzip', gzipSync(task())], ['deflate', deflateSync(task())], ['deflate', deflateRawSync(task())], ['identity', Buffer.from(task())]] as const) {
        const res = await send('POST', '/tasks', bytes, { 'Content-Encoding': coding });
        assert.equal(res.status, 201, `${coding}: ${res.text}`);
      }
    });
    test('a zip bomb is cut off at the limit while inflating → 413', async () => {
      const bomb = gzipSync(Buffer.concat([Buffer.from('{"url":"http://x.test/","body":"'), Buffer.alloc(64 * 1024 * 1024, 0x61), Buffer.from('"}')]));
      assert.ok(bomb.length < 200_000);
      assertError(await send('POST', '/tasks', bomb, { 'Content-Encoding': 'gzip' }), 413, null);
      await stillWorks();
    });
  });

  describe('charset and bytes', () => {
    for (const cs of ['latin1', 'ebcdic', 'utf-16', '"iso-8859-1"']) {
      test(`application/json; charset=${cs} → 415`, async () => {
        assertError(await send('POST', '/tasks', task(), { 'Content-Type': `application/json; charset=${cs}` }), 415, null);
      });
    }
    test('charset=utf-8 in any spelling is accepted', async () => {
      for (const cs of ['utf-8', 'UTF-8', '"utf-8"', 'utf8']) {
        assert.equal((await send('POST', '/tasks', task(), { 'Content-Type': `application/json; charset=${cs}` })).status, 201, cs);
      }
    });
    test('bytes that are not UTF-8 → 400; a byte order mark is fine', async () => {
      assertError(await send('POST', '/tasks', Buffer.concat([Buffer.from('{"url":"http://x.test/","name":"'), Buffer.from([0xc0, 0xaf, 0xff]), Buffer.from('"}')])), 400, null);
      assert.equal((await send('POST', '/tasks', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(task())]))).status, 201);
    });
    test('over 1 MiB decoded → 413', async () => {
      assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, body: 'a'.repeat(1024 * 1024) })), 413, null);
    });
  });

  describe('percent-encoding in the path', () => {
    for (const bad of ['%', '%zz', '%C0%AF', '%E0%A4%A', '%u002e', '%ff%fe', '..%00', '%00']) {
      test(`/tasks/${bad} (and /ping/${bad}) → 400`, async () => {
        assertError(await send('GET', `/api/v1/tasks/${bad}`), 400, null);
        assertError(await send('DELETE', `/api/v1/tasks/${bad}`), 400, null);
        assertError(await send('GET', `/ping/${bad}`), 400, null);
      });
    }
    test('query values: NUL or bad encoding → 400 naming the parameter; a huge offset → 422', async () => {
      assertError(await send('GET', '/api/v1/executions?task_id=%00'), 400, 'task_id');
      assertError(await send('DELETE', '/api/v1/tasks?lane=%zz'), 400, 'lane');
      assertError(await send('DELETE', '/api/v1/tasks?lane=a%00b'), 400, 'lane');
      assertError(await send('GET', '/api/v1/executions?offset=99999999999999999999'), 422, 'offset');
    });
  });

  describe('durations and dates past the horizon', () => {
    test('delay "99999999999999999999h" → 422 delay (task and batch)', async () => {
      assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, delay: '99999999999999999999h' })), 422, 'delay');
      assertError(await send('POST', '/tasks/batch', JSON.stringify({ lane: 'l', tasks: [{ url: URL_OK }], delay: '99999999999999999999h' })), 422, 'delay');
      assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, delay: '3651d' })), 422, 'delay');
      assert.equal((await send('POST', '/tasks', JSON.stringify({ url: URL_OK, delay: '3650d' }))).status, 201);
    });
    test('a debounce window past the horizon → 422 debounce', async () => {
      assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, lane: 'd', debounce_key: 'k', debounce: '1e9d' })), 422, 'debounce');
      assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, lane: 'd', debounce_key: 'k', debounce: '9999999999d' })), 422, 'debounce');
    });
    test('run_at outside 1970..9999, too far ahead, or unreadable → 422 run_at', async () => {
      for (const runAt of ['9999-12-31T23:59:59Z', '1969-12-31T23:59:59Z', '0000-01-01T00:00:00Z', '2016-12-31T23:59:60Z', new Date(Date.now() + 11 * 365.25 * 86_400_000).toISOString()]) {
        assertError(await send('POST', '/tasks', JSON.stringify({ url: URL_OK, run_at: runAt })), 422, 'run_at');
      }
      assertError(await send('POST', '/tasks/batch', JSON.stringify({ lane: 'l', tasks: [{ url: URL_OK }], run_at: '9999-12-31T23:59:59Z' })), 422, 'run_at');
    });
    test('since/until past the horizon → 422 naming the parameter', async () => {
      assertError(await send('GET', '/api/v1/executions?since=99999999999999d'), 422, 'since');
      assertError(await send('GET', '/api/v1/executions?until=0001-01-01T00:00:00Z'), 422, 'until');
      assertError(await send('GET', '/api/v1/executions?since=2024-13-45'), 400, 'since');
      assert.equal((await send('GET', '/api/v1/executions?since=7d&until=9999-01-01T00:00:00Z')).status, 200);
    });
  });

  describe('nesting', () => {
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    test('a body nested 10,000 levels deep → 422 naming where', async () => {
      const res = await send('POST', '/tasks', `{"url":"${URL_OK}","body":{"a":${nested(10_000)}}}`);
      assertError(res, 422, `body.a${'[0]'.repeat(62)}`);
      assertError(await send('POST', '/tasks/batch', nested(100_000)), 422, '[0]'.repeat(64));
      assertError(await send('PUT', '/sync', `{"schedules":${nested(5000)}}`), 422, `schedules${'[0]'.repeat(63)}`);
    });
    test('64 levels (the request object being the first) are accepted', async () => {
      assert.equal((await send('POST', '/tasks', `{"url":"${URL_OK}","delay":"1h","body":${nested(63)}}`)).status, 201);
      assertError(await send('POST', '/tasks', `{"url":"${URL_OK}","delay":"1h","body":${nested(64)}}`), 422, `body${'[0]'.repeat(63)}`);
    });
  });

  describe('URLs that do not parse', () => {
    test('callback_url with port 99999 in a batch → 422 callback_url', async () => {
      assertError(await send('POST', '/tasks/batch', JSON.stringify({ lane: 'l', tasks: [{ url: URL_OK }], callback_url: 'http://127.0.0.1:99999/' })), 422, 'callback_url');
      assertError(await send('POST', '/tasks/batch', JSON.stringify({ lane: 'l', tasks: [{ url: URL_OK }, { url: 'http://[::1/' }] })), 422, 'tasks[1].url');
    });
    test('every URL field: bad port, port 0, bad host → 422 naming it', async () => {
      const cases: Array<[string, string, Record<string, unknown>, string]> = [
        ['POST', '/tasks', { url: 'http://127.0.0.1:99999/' }, 'url'],
        ['POST', '/tasks', { url: 'http://127.0.0.1:0/' }, 'url'],
        ['POST', '/tasks', { url: URL_OK, callback_url: 'https://a b.test/' }, 'callback_url'],
        ['POST', '/tasks', { url: URL_OK, on_failure_url: 'http://x.test:65536/' }, 'on_failure_url'],
        ['POST', '/tasks', { url: URL_OK, on_recovery_url: 'http://[zz]/' }, 'on_recovery_url'],
        ['POST', '/schedules', { url: 'http://x.test:123456/', cron: '@daily' }, 'url'],
        ['POST', '/monitors', { name: 'm', schedule_type: 'interval', interval_seconds: 60, on_failure_url: 'http://x.test:99999' }, 'on_failure_url'],
        ['POST', '/endpoints', { name: 'e', forward_urls: [URL_OK, 'http://x.test:70000/'] }, 'forward_urls[1]'],
        ['PUT', '/organization', { notification_webhook_url: 'http://x.test:99999/' }, 'notification_webhook_url'],
        ['PUT', '/sync', { schedules: [{ key: 'k', url: 'http://x.test:99999/', cron: '@daily' }] }, 'schedules[0].url'],
      ];
      for (const [method, path, body, field] of cases) assertError(await send(method, path, JSON.stringify(body)), 422, field);
    });
  });

  describe('NUL and unpaired surrogates never reach the log', () => {
    test('\\u0000 anywhere in a body → 422 naming the field; the projector keeps going', async () => {
      const cases: Array<[string, string, string, string | null]> = [
        ['POST', '/tasks', `{"url":"${URL_OK}","name":"a\\u0000b"}`, 'name'],
        ['POST', '/tasks', `{"url":"${URL_OK}","headers":{"X-Foo":"v\\u0000"}}`, 'headers.X-Foo'],
        ['POST', '/tasks', `{"url":"${URL_OK}","body":{"deep":["ok",{"x":"\\u0000"}]}}`, 'body.deep[1].x'],
        ['POST', '/tasks', `{"url":"${URL_OK}","body":"\\u0000"}`, 'body'],
        ['POST', '/tasks', `{"url":"${URL_OK}","headers":{"X-\\u0000":"v"}}`, 'headers.X-\ufffd'],
        ['POST', '/tasks/batch', `{"lane":"l","tasks":[{"url":"${URL_OK}"},{"url":"${URL_OK}"},{"url":"${URL_OK}","name":"\\u0000"}]}`, 'tasks[2].name'],
        ['POST', '/tasks', `{"url":"${URL_OK}","name":"\\ud800"}`, 'name'],
        ['POST', '/tasks', `{"url":"${URL_OK}","name":"x\\udc00y"}`, 'name'],
        ['POST', '/schedules', `{"url":"${URL_OK}","cron":"@daily","script":"-- \\u0000"}`, 'script'],
        ['POST', '/endpoints', '{"name":"e","secrets":{"K":"\\u0000"}}', 'secrets.K'],
        ['PUT', '/organization', '{"notification_email":"a\\u0000@x.test"}', 'notification_email'],
        ['PUT', '/sync', '{"monitors":[{"key":"k\\u0000","name":"m","schedule_type":"interval","interval_seconds":60}]}', 'monitors[0].key'],
      ];
      for (const [method, path, body, field] of cases) assertError(await send(method, path, body), 422, field);
      // A raw NUL byte is valid UTF-8 but not valid JSON text.
      assertError(await send('POST', '/tasks', Buffer.from(`{"url":"${URL_OK}","name":"a\0b"}`)), 400, null);
      // A surrogate pair (an emoji) is fine.
      assert.equal((await send('POST', '/tasks', `{"url":"${URL_OK}","delay":"1h","name":"\\ud83d\\ude00"}`)).status, 201);
      await stillWorks();
    });

    test('a ping with NUL bytes and invalid UTF-8 in its body is recorded, stored safely', async () => {
      const mon = await api('POST', '/monitors', { name: 'pinged', schedule_type: 'interval', interval_seconds: 60 });
      assert.equal(mon.status, 201);
      const pingPath = new URL(mon.body.data.ping_url).pathname;
      const body = Buffer.concat([Buffer.from('ok\0'), Buffer.from([0xff, 0xfe]), Buffer.from('done')]);
      const res = await rawRequest(svc.url, { method: 'POST', path: pingPath, body, headers: { 'User-Agent': 'agent\u00e9' } });
      assert.equal(res.status, 200, res.text);
      const pings = await api('GET', `/monitors/${mon.body.data.id}/pings`);
      assert.equal(pings.status, 200);
      assert.equal(pings.body.data[0].body, 'ok\ufffd\ufffd\ufffddone');
      assert.equal((await rawRequest(svc.url, { method: 'POST', path: pingPath, body: Buffer.from('x'), headers: { 'Content-Encoding': 'br' } })).status, 415);
      await stillWorks();
    });

    test('an inbound body with NUL and invalid UTF-8 round-trips byte for byte; its query is stored as sent', async () => {
      const ep = await api('POST', '/endpoints', { name: 'raw' });
      assert.equal(ep.status, 201);
      const inPath = new URL(ep.body.data.inbound_url).pathname;
      const body = Buffer.from([0x00, 0xff, 0xfe, 0xc0, 0xaf, 0x7b, 0x00]);
      const res = await rawRequest(svc.url, { method: 'POST', path: `${inPath}?a=%00&b=%zz&c=%ff`, body, headers: { 'Content-Type': 'application/json; charset=latin1', 'Content-Encoding': 'br' } });
      assert.equal(res.status, 200, res.text);
      // The router records the event shortly after the receiver stored the request.
      const event = await eventually(async () => {
        const r = await api('GET', `/endpoints/${ep.body.data.id}/events/${res.body.id}`);
        return r.status === 200 ? r : null;
      });
      assert.equal(event.body.data.request.body_encoding, 'base64');
      assert.deepEqual(Buffer.from(event.body.data.request.body, 'base64'), body);
      assert.equal(event.body.data.request.query, 'a=%00&b=%zz&c=%ff');
      await stillWorks();
    });
  });

  describe('raw protocol abuse is answered by Node with a 4xx', () => {
    test('NUL in the request line or a header value, header injection', async () => {
      for (const head of [
        'GET /api/v1/tasks/\0 HTTP/1.1\r\nHost: x\r\n\r\n',
        `GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\0\r\n\r\n`,
        'GET /ping/x HTTP/1.1\r\nHost: x\r\nUser-Agent: a\rb\r\n\r\n',
        'POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
      ]) {
        const res = await rawExchange(svc.url, head);
        assert.ok(res.status >= 400 && res.status < 500, `${JSON.stringify(head)} → ${res.status}`);
      }
    });
  });

  test('cron aliases the contract lists, @midnight included, create schedules and cron monitors', async () => {
    for (const alias of ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly']) {
      const s = await api('POST', '/schedules', { url: URL_OK, cron: alias });
      assert.equal(s.status, 201, `${alias}: ${JSON.stringify(s.body)}`);
      const m = await api('POST', '/monitors', { name: alias, schedule_type: 'cron', cron_expression: alias });
      assert.equal(m.status, 201, `${alias}: ${JSON.stringify(m.body)}`);
    }
    assertError(await api('POST', '/schedules', { url: URL_OK, cron: '@sometimes' }), 422, 'cron');
  });
});
