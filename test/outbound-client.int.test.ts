import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOutboundClient, NotSent } from '../src/dispatchers/outbound-client.ts';
import { type OutboundResult } from '../src/commands/execution/exchange.ts';
import { eventually } from './support/wait.ts';

interface Seen { method: string; url: string; headers: IncomingMessage['headers']; body: string }

async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const seen: Seen[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      handler(req, res);
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    seen,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

function expectResponse(r: OutboundResult) {
  assert.equal(r.kind, 'response', r.kind === 'error' ? `${r.error}: ${r.message}` : '');
  if (r.kind !== 'response') throw new Error('unreachable');
  return r;
}

function expectError(r: OutboundResult, error: string) {
  assert.equal(r.kind, 'error', `expected ${error}, got a response`);
  if (r.kind !== 'error') throw new Error('unreachable');
  assert.equal(r.error, error, r.message);
  return r;
}

test('200 with headers and body, keep-alive reused', async (t) => {
  const srv = await startServer((_req, res) => {
    res.setHeader('X-Custom', 'Value');
    res.setHeader('Set-Cookie', ['a=1', 'b=2']);
    res.end('hello ✓');
  });
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });

  const r = expectResponse(await client.send({ url: `${srv.url}/x?y=1#frag`, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.equal(r.statusCode, 200);
  assert.equal(r.body, 'hello ✓');
  assert.equal(r.truncated, false);
  assert.equal(r.headers['x-custom'], 'Value');
  assert.equal(r.headers['set-cookie'], 'a=1, b=2');
  assert.equal(r.headers['content-length'], String(Buffer.byteLength('hello ✓')));
  assert.ok(r.startedAt instanceof Date);
  assert.ok(r.durationMs >= 0 && r.durationMs < 5000);
  assert.equal(srv.seen[0]?.url, '/x?y=1');

  for (let i = 0; i < 5; i++) expectResponse(await client.send({ url: srv.url, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.ok(srv.connections() <= 2, `connections: ${srv.connections()}`);
});

test('method, custom headers and body arrive at the server', async (t) => {
  const srv = await startServer((_req, res) => { res.statusCode = 201; res.end(); });
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });

  const body = JSON.stringify({ hello: 'wörld' });
  const r = expectResponse(await client.send({
    url: `${srv.url}/hook`,
    method: 'PUT',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer abc', 'X-Jetcron-Execution-Id': 'exec_1' },
    body,
    timeoutMs: 5000,
  }));
  assert.equal(r.statusCode, 201);
  assert.equal(r.body, '');
  const s = srv.seen[0];
  assert.ok(s);
  assert.equal(s.method, 'PUT');
  assert.equal(s.url, '/hook');
  assert.equal(s.body, body);
  assert.equal(s.headers['content-type'], 'application/json');
  assert.equal(s.headers.authorization, 'Bearer abc');
  assert.equal(s.headers['x-jetcron-execution-id'], 'exec_1');
  assert.equal(s.headers['content-length'], String(Buffer.byteLength(body)));
});

test('slow server: timeout before headers and while reading the body', async (t) => {
  const srv = await startServer((req, res) => {
    if (req.url === '/body') { res.writeHead(200); res.write('partial'); }
  });
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });

  for (const path of ['/headers', '/body']) {
    const started = Date.now();
    const r = expectError(await client.send({ url: srv.url + path, method: 'GET', headers: {}, timeoutMs: 300 }), 'timeout');
    const took = Date.now() - started;
    assert.equal(r.message, 'timed out after 300 ms');
    // Never before the timeout; how late depends on the machine, so it is not checked.
    assert.ok(took >= 290, `gave up after ${took} ms`);
    assert.ok(r.durationMs >= 290, `durationMs ${r.durationMs}`);
  }
  // The client stays usable after aborted exchanges.
  const srv2 = await startServer((_req, res) => res.end('ok'));
  t.after(() => srv2.close());
  assert.equal(expectResponse(await client.send({ url: srv2.url, method: 'GET', headers: {}, timeoutMs: 2000 })).body, 'ok');
});

test('a request still queued for a connection times out on its own bound', async (t) => {
  const srv = await startServer(() => { /* never answers */ });
  const client = createOutboundClient({ allowPrivateTargets: true, connectionsPerOrigin: 1 });
  t.after(async () => { await client.close(); await srv.close(); });

  // The first holds the only connection until its 600 ms timeout; the queued one gives up
  // at its own 150 ms, before the first ends (an order, not a speed).
  let firstEnded = false;
  const first = client.send({ url: `${srv.url}/first`, method: 'GET', headers: {}, timeoutMs: 600 }).finally(() => (firstEnded = true));
  const queued = expectError(await client.send({ url: `${srv.url}/queued`, method: 'GET', headers: {}, timeoutMs: 150 }), 'timeout');
  assert.equal(firstEnded, false, 'the queued request waited for the first one instead of its own timeout');
  assert.equal(queued.message, 'timed out after 150 ms');
  expectError(await first, 'timeout');
  // A later request takes the freed connection: once the server saw it, the timed-out
  // queued one (ahead of it) would have been sent already, had it been.
  const later = client.send({ url: `${srv.url}/later`, method: 'GET', headers: {}, timeoutMs: 60_000 });
  await eventually(() => srv.seen.length >= 2);
  assert.deepEqual(srv.seen.map((s) => s.url), ['/first', '/later'], 'the timed-out queued request is never sent');
  await srv.close();
  await later;
});

test('mayWrite is asked once the request has its socket: a no drops it unwritten, also after a wait in the queue', async (t) => {
  const srv = await startServer((_req, res) => setTimeout(() => res.end('ok'), 300));
  const client = createOutboundClient({ allowPrivateTargets: true, connectionsPerOrigin: 1 });
  t.after(async () => { await client.close(); await srv.close(); });

  await assert.rejects(client.send({ url: `${srv.url}/refused`, method: 'POST', headers: {}, body: 'x', timeoutMs: 5_000, mayWrite: () => false }), NotSent);
  // Allowed when queued, refused by the time the only connection is free: the answer at the socket counts.
  let fenced = false;
  const first = client.send({ url: `${srv.url}/first`, method: 'GET', headers: {}, timeoutMs: 5_000 });
  const queued = client.send({ url: `${srv.url}/queued`, method: 'GET', headers: {}, timeoutMs: 5_000, mayWrite: () => !fenced });
  await eventually(() => srv.seen.length >= 1);
  fenced = true;
  expectResponse(await first);
  await assert.rejects(queued, NotSent);
  const allowed = expectResponse(await client.send({ url: `${srv.url}/allowed`, method: 'GET', headers: {}, timeoutMs: 5_000, mayWrite: () => true }));
  assert.equal(allowed.body, 'ok');
  assert.deepEqual(srv.seen.map((s) => s.url), ['/first', '/allowed'], 'a refused request never reaches the server');
});

test('huge response is truncated at 262144 bytes', async (t) => {
  const srv = await startServer((req, res) => {
    const size = req.url === '/exact' ? 262_144 : 1024 * 1024;
    res.end(Buffer.alloc(size, 'a'));
  });
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });

  const big = expectResponse(await client.send({ url: `${srv.url}/big`, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.equal(big.statusCode, 200);
  assert.equal(big.truncated, true);
  assert.equal(Buffer.byteLength(big.body), 262_144);
  assert.equal(big.headers['content-length'], String(1024 * 1024));

  const exact = expectResponse(await client.send({ url: `${srv.url}/exact`, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.equal(exact.truncated, false);
  assert.equal(exact.body.length, 262_144);
});

test('maxResponseBytes is configurable', async (t) => {
  const srv = await startServer((_req, res) => res.end('0123456789'));
  const client = createOutboundClient({ allowPrivateTargets: true, maxResponseBytes: 4 });
  t.after(async () => { await client.close(); await srv.close(); });
  const r = expectResponse(await client.send({ url: srv.url, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.deepEqual([r.body, r.truncated], ['0123', true]);
});

test('closed port and DNS failure are connection errors', async (t) => {
  const srv = await startServer((_req, res) => res.end());
  const { port } = srv;
  await srv.close();
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(() => client.close());

  const refused = expectError(await client.send({ url: `http://127.0.0.1:${port}/`, method: 'POST', headers: {}, body: 'x', timeoutMs: 5000 }), 'connection');
  assert.match(refused.message, /ECONNREFUSED/);
  const dns = expectError(await client.send({ url: 'http://nonexistent.invalid/', method: 'GET', headers: {}, timeoutMs: 5000 }), 'connection');
  assert.match(dns.message, /ENOTFOUND|EAI_AGAIN/);
});

test('private targets are refused unless allowed, and nothing is sent', async (t) => {
  const srv = await startServer((_req, res) => res.end('secret'));
  const client = createOutboundClient({ allowPrivateTargets: false });
  t.after(async () => { await client.close(); await srv.close(); });

  const literal = expectError(await client.send({ url: `${srv.url}/`, method: 'GET', headers: {}, timeoutMs: 5000 }), 'refused_target');
  assert.equal(
    literal.message,
    'target address 127.0.0.1 is private, loopback, link-local or metadata; refused (set JETCRON_ALLOW_PRIVATE_TARGETS=1 to allow)',
  );
  const byName = expectError(await client.send({ url: `http://localhost:${srv.port}/`, method: 'POST', headers: {}, body: 'x', timeoutMs: 5000 }), 'refused_target');
  assert.match(byName.message, /^target address (127\.0\.0\.1|::1) is private, loopback, link-local or metadata; refused/);
  expectError(await client.send({ url: `http://[::ffff:127.0.0.1]:${srv.port}/`, method: 'GET', headers: {}, timeoutMs: 5000 }), 'refused_target');
  expectError(await client.send({ url: `http://0x7f.1:${srv.port}/`, method: 'GET', headers: {}, timeoutMs: 5000 }), 'refused_target');
  assert.equal(srv.seen.length, 0);
  assert.equal(srv.connections(), 0);
});

test('only http and https URLs', async (t) => {
  const client = createOutboundClient({ allowPrivateTargets: false });
  t.after(() => client.close());
  for (const url of ['ftp://x', 'file:///etc/passwd', 'not a url', '']) {
    expectError(await client.send({ url, method: 'GET', headers: {}, timeoutMs: 1000 }), 'invalid_url');
  }
});

test('redirects are not followed', async (t) => {
  const srv = await startServer((req, res) => {
    if (req.url === '/start') { res.writeHead(302, { Location: '/other' }); res.end('moved'); } else res.end('other');
  });
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });
  const r = expectResponse(await client.send({ url: `${srv.url}/start`, method: 'GET', headers: {}, timeoutMs: 5000 }));
  assert.equal(r.statusCode, 302);
  assert.equal(r.headers.location, '/other');
  assert.equal(r.body, 'moved');
  assert.deepEqual(srv.seen.map((s) => s.url), ['/start']);
});

test('invalid request options resolve to an error instead of throwing', async (t) => {
  const srv = await startServer((_req, res) => res.end());
  const client = createOutboundClient({ allowPrivateTargets: true });
  t.after(async () => { await client.close(); await srv.close(); });
  const r = await client.send({ url: srv.url, method: 'BAD METHOD', headers: { 'bad header': 'x' }, timeoutMs: 1000 });
  assert.equal(r.kind, 'error');
  assert.equal(srv.seen.length, 0);
});

test('many concurrent requests', async (t) => {
  const srv = await startServer((req, res) => res.end(req.url));
  const client = createOutboundClient({ allowPrivateTargets: true, connectionsPerOrigin: 8 });
  t.after(async () => { await client.close(); await srv.close(); });
  const results = await Promise.all(
    Array.from({ length: 200 }, (_, i) => client.send({ url: `${srv.url}/${i}`, method: 'GET', headers: {}, timeoutMs: 10_000 })),
  );
  results.forEach((r, i) => assert.equal(expectResponse(r).body, `/${i}`));
  assert.ok(srv.connections() <= 8);
});
