import assert from 'node:assert/strict';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { notifierIdle } from './support/positions.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget, type ReceivedRequest } from './support/target.ts';

// Endpoint forwarding retry n waits min(30 s · 2^(n−1), 1 h): 30 s → 300 ms, 60 s → 600 ms.
// A 429 without Retry-After blocks its host 60 s → 600 ms.
const SCALE = 0.01;
const scaled = (ms: number) => Math.round(ms * SCALE);
// Timer and clock granularity: a wait may look a few ms short when measured at the target.
const SLACK_MS = 15;
const FINAL = ['success', 'failed', 'timeout', 'cancelled'];

/**
 * Sends a request with exactly these header lines (names as written, duplicates
 * kept, hop-by-hop headers allowed) over a plain socket: fetch and node:http refuse
 * some of them. The connection closes after the answer.
 */
function sendRaw(url: string, opts: { method: string; headers: [string, string][]; body?: Buffer | string }): Promise<{ status: number; body: any }> {
  const u = new URL(url);
  const body = opts.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(opts.body, 'utf8');
  const lines = [`${opts.method} ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`, ...opts.headers.map(([n, v]) => `${n}: ${v}`), `Content-Length: ${body.length}`];
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(Buffer.concat([head, body])));
    const chunks: Buffer[] = [];
    socket.setTimeout(20_000, () => socket.destroy(new Error('inbound request timed out')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(text);
      if (!m) return reject(new Error(`no HTTP response: ${JSON.stringify(text.slice(0, 200))}`));
      let parsed: unknown = m[2];
      try {
        parsed = JSON.parse(m[2]!);
      } catch {
        /* not JSON */
      }
      resolve({ status: Number(m[1]), body: parsed });
    });
  });
}

/** Posts to an inbound URL with fetch and returns the stored event's id. */
async function inbound(url: string, init: { method?: string; body?: string | Buffer<ArrayBuffer>; headers?: Record<string, string> } = {}): Promise<string> {
  const res = await fetch(url, { method: init.method ?? 'POST', body: init.body, headers: init.headers, signal: AbortSignal.timeout(20_000) });
  const body = (await res.json()) as { id: string; status: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.status, 'received');
  assert.match(body.id, /^evt_/);
  return body.id;
}

/** X-Jetcron-Signature checked over the body's raw bytes (signedWith reads the body as UTF-8 text). */
function signedOverRaw(req: ReceivedRequest, secret: string): boolean {
  const ts = String(req.headers['x-jetcron-timestamp']);
  const exe = String(req.headers['x-jetcron-execution-id']);
  const given = String(req.headers['x-jetcron-signature']);
  if (!/^\d+$/.test(ts) || Math.abs(Number(ts) - Date.now() / 1000) > 300) return false;
  const expected = `sha256=${createHmac('sha256', secret).update(`${ts}.${exe}.`).update(req.raw).digest('hex')}`;
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

describe('endpoint forwarding', () => {
  let svc: TestService;
  let api: Api;
  let secret: string;
  let orgId: string;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    const created = await svc.createOrg('pro');
    api = created.api;
    orgId = created.orgId;
    const org = await api('GET', '/organization');
    assert.equal(org.status, 200);
    secret = org.body.data.webhook_secret;
    assert.match(secret, /^whsec_/);
  });
  after(() => svc.stop());

  async function createEndpoint(body: Record<string, unknown>, client: Api = api) {
    const res = await client('POST', '/endpoints', body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { id: string; name: string; inbound_url: string; slug: string } & Record<string, unknown>;
  }

  const execution = async (id: string, client: Api = api) => {
    const res = await client('GET', `/executions/${id}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.data;
  };
  const finished = (id: string, client: Api = api) =>
    eventually(async () => {
      const e = await execution(id, client);
      return FINAL.includes(e.status) ? e : null;
    }, 20_000);

  /** The event's list row once every execution has ended. */
  const settledEvent = (endpointId: string, eventId: string, client: Api = api) =>
    eventually(async () => {
      const rows = (await client('GET', `/endpoints/${endpointId}/events`)).body.data as any[];
      const row = rows.find((r) => r.id === eventId);
      return row && row.executions.length && row.executions.every((x: any) => FINAL.includes(x.status)) ? row : null;
    }, 20_000);

  test('the original method, headers and body bytes arrive, signed, with the event id; hop-by-hop headers do not', async () => {
    const target = await startTarget(() => ({ status: 200, body: 'ok' }));
    try {
      const ep = await createEndpoint({ name: 'preserve', forward_urls: [`${target.url}/hook?fw=1`], retry_attempts: 0 });
      const body = JSON.stringify({ order: 42, items: ['a', 'b'], note: 'päckchen ✓' });
      const sent = await sendRaw(`${ep.inbound_url}?a=1&b=two`, {
        method: 'POST',
        headers: [
          ['Content-Type', 'application/json'],
          ['X-Custom', 'Hello World'],
          ['x-lower-case', 'kept'],
          ['X-Dup', 'one'],
          ['X-Dup', 'two'],
          ['Authorization', 'Bearer upstream-token'],
          // Hop-by-hop: the standard ones and one that Connection names.
          ['Connection', 'X-Hop, close'],
          ['X-Hop', 'hop-value'],
          ['Keep-Alive', 'timeout=5'],
          ['TE', 'trailers'],
          ['Trailer', 'X-Checksum'],
          ['Proxy-Authorization', 'Basic cHJveHk6cHc='],
          ['Proxy-Connection', 'keep-alive'],
          ['Upgrade', 'h2c'],
          // A sender cannot forge jetcron's own headers.
          ['X-Jetcron-Signature', 'sha256=forged'],
          ['X-Jetcron-Event-Id', 'evt_forged'],
          ['X-Jetcron-Execution-Id', 'exe_forged'],
        ],
        body,
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.equal(sent.body.status, 'received');
      const eventId: string = sent.body.id;

      const got = await eventually(async () => target.received[0]);
      const row = await settledEvent(ep.id, eventId);
      assert.equal(row.execution_status, 'success');
      const exeId: string = row.execution_id;
      assert.match(exeId, /^exe_/);

      assert.equal(got.method, 'POST');
      assert.equal(got.path, '/hook?fw=1&a=1&b=two', 'the forward URL as configured, then the inbound query string');
      assert.ok(got.raw.equals(Buffer.from(body, 'utf8')), 'body bytes unchanged');
      assert.equal(got.headers['content-length'], String(Buffer.byteLength(body)));
      assert.equal(got.headers['content-type'], 'application/json');
      assert.equal(got.headers['x-custom'], 'Hello World');
      assert.equal(got.headers['x-lower-case'], 'kept');
      assert.equal(got.headers['x-dup'], 'one, two');
      assert.equal(got.headers.authorization, 'Bearer upstream-token');
      assert.equal(got.headers.host, new URL(target.url).host, "Host is the forward URL's");

      for (const name of ['x-hop', 'keep-alive', 'te', 'trailer', 'proxy-authorization', 'proxy-connection', 'upgrade']) {
        assert.equal(got.headers[name], undefined, `${name} is hop-by-hop and must not be forwarded`);
      }
      assert.doesNotMatch(String(got.headers.connection ?? ''), /x-hop/i);

      assert.equal(got.headers['x-jetcron-event-id'], eventId);
      assert.equal(got.headers['x-jetcron-execution-id'], exeId);
      assert.equal(got.headers['x-jetcron-task-id'], ep.id);
      assert.match(String(got.headers['x-jetcron-signature']), /^sha256=[0-9a-f]{64}$/);
      assert.ok(signedWith(got, secret, exeId), 'signed with the organization webhook secret');
      assert.ok(signedOverRaw(got, secret), 'signature over the raw bytes');
      assert.equal(target.received.length, 1);

      // The stored event keeps the request as received, query included.
      const stored = await api('GET', `/endpoints/${ep.id}/events/${eventId}`);
      assert.equal(stored.status, 200, JSON.stringify(stored.body));
      assert.equal(stored.body.data.request.method, 'POST');
      assert.equal(stored.body.data.request.query, 'a=1&b=two');
      assert.equal(stored.body.data.request.body, body);
    } finally {
      await target.close();
    }
  });

  test('a binary (non-UTF-8) body arrives byte for byte and its signature verifies over those bytes', async () => {
    const target = await startTarget(() => ({ status: 204 }));
    try {
      const ep = await createEndpoint({ name: 'binary', forward_urls: [`${target.url}/bin`], retry_attempts: 0 });
      // Every byte value 256 times (64 KB), shuffled: NULs, lone continuation bytes, 0xFF...
      const bytes = Buffer.alloc(256 * 256);
      for (let i = 0; i < bytes.length; i++) bytes[i] = i & 0xff;
      const rnd = randomBytes(bytes.length * 4);
      for (let i = bytes.length - 1; i > 0; i--) {
        const j = rnd.readUInt32LE(i * 4) % (i + 1);
        const t = bytes[i]!;
        bytes[i] = bytes[j]!;
        bytes[j] = t;
      }
      assert.ok(!Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes), 'the body is not valid UTF-8');

      const eventId = await inbound(ep.inbound_url, { body: bytes, headers: { 'Content-Type': 'application/octet-stream' } });
      const got = await eventually(async () => target.received[0]);
      assert.equal(got.raw.length, bytes.length);
      assert.ok(got.raw.equals(bytes), 'body bytes unchanged');
      assert.equal(got.headers['content-type'], 'application/octet-stream');
      assert.equal(got.headers['x-jetcron-event-id'], eventId);
      assert.ok(signedOverRaw(got, secret), 'signature over the raw (non-UTF-8) bytes');

      const row = await settledEvent(ep.id, eventId);
      assert.equal(row.execution_status, 'success');
      assert.equal(got.headers['x-jetcron-execution-id'], row.execution_id);
      // The recorded request keeps the bytes too (base64, as they are not text).
      const exe = await execution(row.execution_id);
      assert.equal(exe.status_code, 204);
      assert.equal(exe.request.body_encoding, 'base64');
      assert.ok(Buffer.from(exe.request.body, 'base64').equals(bytes));
    } finally {
      await target.close();
    }
  });

  test('forward_method, forward_headers (custom wins whatever the case) and forward_body replace the originals; updates apply to the next event; empty means original', async () => {
    const target = await startTarget(() => ({ status: 200 }));
    try {
      const ep = await createEndpoint({
        name: 'overrides',
        forward_urls: [`${target.url}/o`],
        retry_attempts: 0,
        forward_method: 'PUT',
        forward_headers: { 'content-type': 'text/plain; charset=utf-8', 'X-Added': 'yes', 'x-custom': 'from-config' },
        forward_body: 'replaced body ✓',
      });
      assert.equal(ep.forward_method, 'PUT');
      const original = '{"original":true}';
      const send = (method = 'POST') =>
        inbound(ep.inbound_url, { method, body: original, headers: { 'Content-Type': 'application/json', 'X-Custom': 'from-sender', 'X-Orig': 'keep' } });
      const nth = (n: number) => eventually(async () => target.received[n]);

      // 1. All three overrides.
      await send();
      const r1 = await nth(0);
      assert.equal(r1.method, 'PUT');
      assert.equal(r1.headers['content-type'], 'text/plain; charset=utf-8', 'the custom Content-Type replaces the original, not joined to it');
      assert.equal(r1.headers['x-custom'], 'from-config', 'custom wins regardless of case');
      assert.equal(r1.headers['x-added'], 'yes');
      assert.equal(r1.headers['x-orig'], 'keep', 'originals merge with the custom headers');
      assert.equal(r1.body, 'replaced body ✓');
      assert.equal(r1.headers['content-length'], String(Buffer.byteLength('replaced body ✓')));
      assert.ok(signedOverRaw(r1, secret), 'signed over the replaced body');
      assert.ok(signedWith(r1, secret, String(r1.headers['x-jetcron-execution-id'])));

      // 2. Emptied (empty string / empty object): the originals go through.
      const cleared = await api('PUT', `/endpoints/${ep.id}`, { forward_method: '', forward_headers: {}, forward_body: '' });
      assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
      assert.equal(cleared.body.data.forward_method, null);
      assert.equal(cleared.body.data.forward_body, null);
      await send();
      const r2 = await nth(1);
      assert.equal(r2.method, 'POST');
      assert.equal(r2.headers['content-type'], 'application/json');
      assert.equal(r2.headers['x-custom'], 'from-sender');
      assert.equal(r2.headers['x-added'], undefined);
      assert.equal(r2.body, original);
      assert.ok(signedOverRaw(r2, secret));

      // 3. Headers only: method (PATCH as sent) and body stay the originals.
      const headersOnly = await api('PUT', `/endpoints/${ep.id}`, { forward_headers: { 'CONTENT-TYPE': 'application/vnd.custom+json' } });
      assert.equal(headersOnly.status, 200, JSON.stringify(headersOnly.body));
      await send('PATCH');
      const r3 = await nth(2);
      assert.equal(r3.method, 'PATCH');
      assert.equal(r3.headers['content-type'], 'application/vnd.custom+json');
      assert.equal(r3.headers['x-custom'], 'from-sender');
      assert.equal(r3.body, original);

      // 4. null clears too; a method override alone keeps the original headers and body.
      const nulls = await api('PUT', `/endpoints/${ep.id}`, { forward_headers: null, forward_method: 'DELETE', forward_body: null });
      assert.equal(nulls.status, 200, JSON.stringify(nulls.body));
      await send();
      const r4 = await nth(3);
      assert.equal(r4.method, 'DELETE');
      assert.equal(r4.headers['content-type'], 'application/json');
      assert.equal(r4.body, original);

      await eventually(async () => {
        const rows = (await api('GET', `/executions?task_id=${ep.id}`)).body.data as any[];
        return rows.length === 4 && rows.every((r) => r.status === 'success');
      });
      assert.equal(target.received.length, 4);
    } finally {
      await target.close();
    }
  });

  test('several forward URLs: one execution per URL, each with its own id; the event lists them; execution rows are type endpoint', async () => {
    const targets = await Promise.all([startTarget(), startTarget(), startTarget()]);
    try {
      const urls = targets.map((t, i) => `${t.url}/dest-${i}`);
      const ep = await createEndpoint({ name: 'fan-out', forward_urls: urls, retry_attempts: 0 });
      const eventId = await inbound(ep.inbound_url, { body: 'fan', headers: { 'Content-Type': 'text/plain' } });
      const got = await Promise.all(targets.map((t) => eventually(async () => t.received[0])));
      const row = await settledEvent(ep.id, eventId);

      const ids = got.map((g) => String(g.headers['x-jetcron-execution-id']));
      assert.equal(new Set(ids).size, 3, 'each URL has its own execution id');
      got.forEach((g, i) => {
        assert.equal(g.path, `/dest-${i}`);
        assert.equal(g.body, 'fan');
        assert.equal(g.headers['x-jetcron-event-id'], eventId);
        assert.ok(signedWith(g, secret, ids[i]!), `delivery ${i} signed with its own execution id`);
      });
      assert.equal(row.executions.length, 3);
      assert.deepEqual(
        row.executions.map((x: any) => [x.id, x.url, x.status]).sort(),
        ids.map((id, i) => [id, urls[i], 'success']).sort(),
      );
      assert.equal(row.execution_id, ids[0], "execution_id is the first forward URL's");
      assert.equal(row.execution_status, 'success');

      const list = await api('GET', `/executions?task_id=${ep.id}`);
      assert.equal(list.status, 200);
      const rows = list.body.data as any[];
      assert.equal(rows.length, 3);
      assert.deepEqual(rows.map((r) => [r.id, r.task.url]).sort(), ids.map((id, i) => [id, urls[i]]).sort());
      for (const r of rows) {
        assert.deepEqual(r.task, { id: ep.id, name: 'fan-out', type: 'endpoint', url: r.task.url });
        assert.equal(r.status, 'success');
        assert.equal(r.attempt, 1);
      }
      const one = await execution(ids[1]!);
      assert.equal(one.task.type, 'endpoint');
      assert.equal(one.task.url, urls[1]);
      for (const t of targets) assert.equal(t.received.length, 1);
    } finally {
      await Promise.all(targets.map((t) => t.close()));
    }
  });

  test('a 5xx is retried as attempts of the same execution, 30 s then 60 s apart (scaled)', async () => {
    const target = await startTarget((_req, i) => (i < 2 ? { status: 500, body: 'down' } : { status: 200, body: 'up' }));
    try {
      const ep = await createEndpoint({ name: 'retrying', forward_urls: [`${target.url}/r`], retry_attempts: 5 });
      const eventId = await inbound(ep.inbound_url, { body: '{"n":1}', headers: { 'Content-Type': 'application/json' } });
      const row = await settledEvent(ep.id, eventId);
      const exe = await finished(row.execution_id);
      assert.equal(exe.status, 'success');
      assert.equal(exe.attempt, 3);
      assert.equal(exe.status_code, 200);
      assert.deepEqual(exe.attempts.map((a: any) => [a.attempt, a.status_code]), [[1, 500], [2, 500], [3, 200]]);
      assert.deepEqual(exe.attempts.map((a: any) => a.status), ['failed', 'failed', 'success']);

      assert.equal(target.received.length, 3);
      for (const r of target.received) {
        assert.equal(r.headers['x-jetcron-execution-id'], exe.id, 'the same execution id on every attempt');
        assert.equal(r.headers['x-jetcron-event-id'], eventId);
        assert.equal(r.body, '{"n":1}');
        assert.ok(signedWith(r, secret, exe.id));
      }
      const [a, b, c] = target.received.map((r) => r.at) as [number, number, number];
      assert.ok(b - a >= scaled(30_000) - SLACK_MS, `1st retry after ${b - a} ms, expected ≥ ${scaled(30_000)}`);
      assert.ok(c - b >= scaled(60_000) - SLACK_MS, `2nd retry after ${c - b} ms, expected ≥ ${scaled(60_000)}`);
      // How late depends on the machine, so only "never early" is checked. The execution is
      // final (success): there is nothing after it to wait for.
      assert.equal(target.received.length, 3, 'nothing after the success');
    } finally {
      await target.close();
    }
  });

  test('retry_attempts 0: a 500 is one attempt and the execution fails', async () => {
    const target = await startTarget(() => ({ status: 500, body: 'nope' }));
    try {
      const ep = await createEndpoint({ name: 'no-retries', forward_urls: [`${target.url}/x`], retry_attempts: 0 });
      const eventId = await inbound(ep.inbound_url, { body: 'x' });
      const row = await settledEvent(ep.id, eventId);
      assert.equal(row.execution_status, 'failed');
      const exe = await finished(row.execution_id);
      assert.equal(exe.status, 'failed');
      assert.equal(exe.attempt, 1);
      assert.equal(exe.status_code, 500);
      assert.equal(exe.attempts.length, 1);
      // Final after one attempt: there is no retry to wait for.
      assert.equal(target.received.length, 1);
      assert.equal((await execution(exe.id)).attempts.length, 1);
    } finally {
      await target.close();
    }
  });

  test('a 4xx fails at once, without retries', async () => {
    const target = await startTarget(() => ({ status: 400, body: 'bad' }));
    try {
      const ep = await createEndpoint({ name: 'bad-request', forward_urls: [`${target.url}/x`], retry_attempts: 5 });
      const eventId = await inbound(ep.inbound_url, { body: 'x' });
      const row = await settledEvent(ep.id, eventId);
      const exe = await finished(row.execution_id);
      assert.equal(exe.status, 'failed');
      assert.equal(exe.status_code, 400);
      assert.equal(exe.attempt, 1);
      // Final after one attempt: there is no retry to wait for.
      assert.equal(target.received.length, 1, 'no retry after a 4xx');
      assert.equal((await execution(exe.id)).attempts.length, 1);
    } finally {
      await target.close();
    }
  });

  test('a 429 blocks the host: the delivery (and another endpoint\'s to that host) waits out the block without using a retry', async () => {
    let n = 0;
    const target = await startTarget(() => (n++ === 0 ? { status: 429, body: 'slow down' } : { status: 200 }));
    try {
      const ep = await createEndpoint({ name: 'limited', forward_urls: [`${target.url}/first`], retry_attempts: 0 });
      const other = await createEndpoint({ name: 'same-host', forward_urls: [`${target.url}/second`], retry_attempts: 0, use_lane: false });
      const eventId = await inbound(ep.inbound_url, { body: 'a' });
      const hit = await eventually(async () => target.received[0]);
      const pendingRow = await eventually(async () => {
        const rows = (await api('GET', `/endpoints/${ep.id}/events`)).body.data as any[];
        const exeId = rows.find((r) => r.id === eventId)?.execution_id;
        if (!exeId) return null;
        const e = await execution(exeId);
        return e.attempts.length >= 1 ? e : null;
      });
      assert.equal(pendingRow.attempts[0].status_code, 429);
      assert.match(pendingRow.attempts[0].error_message ?? '', /blocked for this organization/);

      await inbound(other.inbound_url, { body: 'b' });
      const exe = await finished(pendingRow.id);
      assert.equal(exe.status, 'success', 'the 429 did not use up the only attempt');
      assert.deepEqual(exe.attempts.map((a: any) => a.status_code), [429, 200]);
      const retried = target.received.find((r) => r.path === '/first' && r !== hit)!;
      assert.ok(retried.at - hit.at >= scaled(60_000) - SLACK_MS, `retried ${retried.at - hit.at} ms after the 429`);
      const second = await eventually(async () => target.received.find((r) => r.path === '/second'));
      assert.ok(second.at - hit.at >= scaled(60_000) - SLACK_MS, `the other endpoint's delivery went ${second.at - hit.at} ms after the 429`);
      assert.equal(target.received.length, 3);
    } finally {
      await target.close();
    }
  });

  test('use_lane false: deliveries overlap; use_lane true: one at a time, in arrival order', async () => {
    const DELAY = 700;
    const spans: Array<{ tag: string; start: number; end: number }> = [];
    const target = await startTarget((req) => {
      spans.push({ tag: `${req.path}:${req.body}`, start: req.at, end: req.at + DELAY });
      return { status: 200, delayMs: DELAY };
    });
    try {
      const parallel = await createEndpoint({ name: 'parallel', forward_urls: [`${target.url}/p`], use_lane: false, retry_attempts: 0 });
      const serial = await createEndpoint({ name: 'serial', forward_urls: [`${target.url}/s`], retry_attempts: 0 });
      assert.equal(serial.use_lane, true, 'use_lane defaults to true');

      const p = [await inbound(parallel.inbound_url, { body: '1' }), await inbound(parallel.inbound_url, { body: '2' })];
      await Promise.all(p.map((id) => settledEvent(parallel.id, id)));
      const ps = spans.filter((s) => s.tag.startsWith('/p'));
      assert.equal(ps.length, 2);
      assert.ok(Math.max(ps[0]!.start, ps[1]!.start) < Math.min(ps[0]!.end, ps[1]!.end), `both started before either ended: ${JSON.stringify(ps)}`);

      const s: string[] = [];
      for (const tag of ['A', 'B', 'C']) s.push(await inbound(serial.inbound_url, { body: tag }));
      await Promise.all(s.map((id) => settledEvent(serial.id, id)));
      const ss = spans.filter((x) => x.tag.startsWith('/s'));
      assert.deepEqual(ss.map((x) => x.tag), ['/s:A', '/s:B', '/s:C'], 'arrival order kept');
      for (let i = 1; i < ss.length; i++) {
        assert.ok(ss[i]!.start >= ss[i - 1]!.end - SLACK_MS, `delivery ${i} started ${ss[i - 1]!.end - ss[i]!.start} ms before the previous ended`);
      }
    } finally {
      await target.close();
    }
  });

  test('on_failure_url gets endpoint.failed once per failure sequence, on_recovery_url endpoint.recovered', async () => {
    const target = await startTarget(() => ({ status: 500, body: 'broken' }));
    const hook = await startTarget(() => ({ status: 200 }));
    try {
      const ep = await createEndpoint({
        name: 'notifying',
        forward_urls: [`${target.url}/n`],
        retry_attempts: 0,
        on_failure_url: `${hook.url}/failed`,
        on_recovery_url: `${hook.url}/recovered`,
      });
      const e1 = await inbound(ep.inbound_url, { body: 'one' });
      const failedExe = await finished((await settledEvent(ep.id, e1)).execution_id);
      assert.equal(failedExe.status, 'failed');

      const f = await eventually(async () => hook.received.find((r) => r.path === '/failed'));
      assert.equal(f.method, 'POST');
      assert.match(String(f.headers['content-type']), /^application\/json/);
      const fb = JSON.parse(f.body);
      assert.equal(fb.event, 'endpoint.failed');
      assert.equal(fb.endpoint.id, ep.id);
      assert.equal(fb.endpoint.name, 'notifying');
      assert.equal(fb.execution.id, failedExe.id);
      assert.equal(fb.execution.status, 'failed');
      assert.equal(fb.execution.status_code, 500);
      assert.equal(fb.execution.attempt, 1);
      assert.equal(fb.text, undefined, 'no chat text for on_failure_url');
      assert.equal(f.headers['x-jetcron-execution-id'], failedExe.id);
      assert.ok(signedWith(f, secret, failedExe.id), 'signed like every outgoing request');

      // A second failure in a row: no new notification.
      const e2 = await inbound(ep.inbound_url, { body: 'two' });
      assert.equal((await finished((await settledEvent(ep.id, e2)).execution_id)).status, 'failed');
      await notifierIdle(svc.natsUrl, orgId);
      assert.equal(hook.received.length, 1);

      target.setResponder(() => ({ status: 200 }));
      const e3 = await inbound(ep.inbound_url, { body: 'three' });
      const okExe = await finished((await settledEvent(ep.id, e3)).execution_id);
      assert.equal(okExe.status, 'success');
      const r = await eventually(async () => hook.received.find((x) => x.path === '/recovered'));
      const rb = JSON.parse(r.body);
      assert.equal(rb.event, 'endpoint.recovered');
      assert.equal(rb.endpoint.id, ep.id);
      assert.equal(rb.endpoint.name, 'notifying');
      assert.equal(rb.execution.id, okExe.id);
      assert.equal(rb.execution.status, 'success');
      assert.equal(rb.execution.status_code, 200);
      assert.ok(signedWith(r, secret, okExe.id));
      await notifierIdle(svc.natsUrl, orgId);
      assert.equal(hook.received.length, 2);
    } finally {
      await target.close();
      await hook.close();
    }
  });
});
