import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { startEmbeddedNats } from '../src/runtime/embedded-nats.ts';
import { startEmbeddedPostgres } from '../src/runtime/embedded-postgres.ts';
import { natsUrlFromDataDir } from '../src/runtime/find-nats-url.ts';
import { defaultNatsMemoryLimit } from '../src/runtime/nats-memory-limit.ts';
import { createTestDatabase } from './support/postgres.ts';

type TestContext = { after(fn: () => Promise<void>): void };

// node:test runs after() hooks in registration order; cleanups must run in reverse.
function cleanups(t: TestContext): (fn: () => Promise<unknown>) => void {
  const stack: Array<() => Promise<unknown>> = [];
  t.after(async () => {
    for (const fn of stack.reverse()) await fn();
  });
  return (fn) => void stack.push(fn);
}

async function tempDir(defer: (fn: () => Promise<unknown>) => void): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-runtime-test-'));
  defer(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function listen(port: number): Promise<net.Server> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return server;
}

function portOf(server: net.Server): number {
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return address.port;
}

test('startEmbeddedNats passes env to the server and serves Go\'s pprof on profPort when asked', async (t) => {
  const defer = cleanups(t);
  const dataDir = await tempDir(defer);
  // A free port for pprof: bound, read, released.
  const probe = await listen(0);
  const profPort = portOf(probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const lines: string[] = [];
  const nats = await startEmbeddedNats({ dataDir, preferredPort: 0, env: { GODEBUG: 'gctrace=1' }, profPort, log: (line) => lines.push(line) });
  defer(() => nats.stop());

  // gc=1 makes the server collect before it answers: with GODEBUG=gctrace=1 that GC writes its line.
  const res = await fetch(`http://127.0.0.1:${profPort}/debug/pprof/heap?debug=1&gc=1`);
  assert.equal(res.status, 200);
  assert.match(await res.text(), /^heap profile: /);
  while (!lines.some((l) => /^gc \d+ @/.test(l))) await new Promise((r) => setTimeout(r, 20));
});

test('startEmbeddedNats records its URL, serves NATS, and is gone after stop', async (t) => {
  const defer = cleanups(t);
  const dataDir = await tempDir(defer);
  const nats = await startEmbeddedNats({ dataDir, preferredPort: 0 });
  defer(() => nats.stop());

  assert.equal(natsUrlFromDataDir(dataDir), nats.url);
  const nc = await connect({ servers: nats.url });
  assert.equal(nc.info?.jetstream, true);
  assert.equal(nc.info?.max_payload, 8 * 1024 * 1024);
  await nc.close();

  await nats.stop();
  assert.equal(natsUrlFromDataDir(dataDir), undefined);
  await assert.rejects(connect({ servers: nats.url, reconnect: false, timeout: 1000 }));
});

test('startEmbeddedNats picks another port when the preferred one is taken', async (t) => {
  const defer = cleanups(t);
  const dataDir = await tempDir(defer);
  const blocker = await listen(0);
  defer(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  const taken = portOf(blocker);

  const nats = await startEmbeddedNats({ dataDir, preferredPort: taken });
  defer(() => nats.stop());
  assert.notEqual(new URL(nats.url).port, String(taken));
  const nc = await connect({ servers: nats.url });
  await nc.close();
});

test('createTestDatabase gives a queryable database that drop() removes', async () => {
  const db = await createTestDatabase();
  const name = new URL(db.url).pathname.slice(1);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query<{ db: string }>('SELECT current_database() AS db');
  assert.equal(rows[0]?.db, name);

  // drop() must also cut connections that are still open.
  client.on('error', () => {});
  await db.drop();
  await client.end().catch(() => {});

  const admin = new pg.Client({ connectionString: new URL('/postgres', db.url).href });
  await admin.connect();
  const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  await admin.end();
  assert.equal(found.rowCount, 0);
});

test('startEmbeddedPostgres keeps its data across restarts on the same data dir, with minimal WAL', async (t) => {
  const defer = cleanups(t);
  const dataDir = await tempDir(defer);
  const first = await startEmbeddedPostgres({ dataDir });
  try {
    const client = new pg.Client({ connectionString: first.url });
    await client.connect();
    await client.query("CREATE TABLE survivor (id int); INSERT INTO survivor VALUES (42)");
    await client.end();
  } finally {
    await first.stop();
  }
  assert.equal(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), false);

  const second = await startEmbeddedPostgres({ dataDir });
  defer(() => second.stop());
  assert.equal(new URL(second.url).pathname, '/jetcron');
  const client = new pg.Client({ connectionString: second.url });
  await client.connect();
  const { rows } = await client.query<{ id: number }>('SELECT id FROM survivor');
  // One node, no replicas: WAL for crash recovery only (the rebuild's load transaction writes none).
  const wal = await client.query<{ wal_level: string; max_wal_senders: string }>("SELECT current_setting('wal_level') AS wal_level, current_setting('max_wal_senders') AS max_wal_senders");
  await client.end();
  assert.deepEqual(rows, [{ id: 42 }]);
  assert.deepEqual(wal.rows, [{ wal_level: 'minimal', max_wal_senders: '0' }]);
});

/** The environment nats-server runs with, read from /proc through the pid file it writes. */
async function serverEnviron(dataDir: string): Promise<Map<string, string>> {
  const pid = (await readFile(path.join(dataDir, 'nats.pid'), 'utf8')).trim();
  const entries = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0').filter(Boolean);
  return new Map(entries.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
}

async function withProcessEnv<T>(name: string, value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const before = process.env[name];
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

test('the embedded nats-server gets the default GOMEMLIMIT when the environment names none', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const defer = cleanups(t);
  const dataDir = await tempDir(defer);
  const nats = await withProcessEnv('GOMEMLIMIT', undefined, () => startEmbeddedNats({ dataDir, preferredPort: 0, env: { GODEBUG: 'gctrace=1' } }));
  defer(() => nats.stop());

  const env = await serverEnviron(dataDir);
  assert.equal(env.get('GOMEMLIMIT'), defaultNatsMemoryLimit());
  assert.match(env.get('GOMEMLIMIT') ?? '', /^\d+MiB$/);
  assert.equal(env.get('GODEBUG'), 'gctrace=1');
});

test('a GOMEMLIMIT in the environment or the options wins over the default, `off` included', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const defer = cleanups(t);
  const fromProcess = await tempDir(defer);
  const a = await withProcessEnv('GOMEMLIMIT', '300MiB', () => startEmbeddedNats({ dataDir: fromProcess, preferredPort: 0 }));
  defer(() => a.stop());
  assert.equal((await serverEnviron(fromProcess)).get('GOMEMLIMIT'), '300MiB');

  const fromOptions = await tempDir(defer);
  const b = await withProcessEnv('GOMEMLIMIT', undefined, () => startEmbeddedNats({ dataDir: fromOptions, preferredPort: 0, env: { GOMEMLIMIT: 'off' } }));
  defer(() => b.stop());
  assert.equal((await serverEnviron(fromOptions)).get('GOMEMLIMIT'), 'off');
  // Go accepts `off` (no limit): the server runs and answers.
  const nc = await connect({ servers: b.url });
  assert.equal(nc.info?.jetstream, true);
  await nc.close();
});
