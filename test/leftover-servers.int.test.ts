import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/runtime/free-port.ts';
import { processIdentity } from '../src/runtime/process-identity.ts';

// `npm start` as a new user runs it, SIGKILLed, then started again on the same data dir.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const HEALTHY_WITHIN_MS = 120_000;
const canDieWithParent = os.platform() === 'linux' && spawnSync('setpriv', ['--pdeathsig', 'SIGTERM', '--', 'setpriv', '--version']).status === 0;

interface Server {
  pid: number;
  started: string;
}

interface Service {
  boot: ChildProcess;
  /** The `jetcron serve` process under the bootstrap: the one that owns the embedded servers. */
  pid: number;
  url: string;
  nats: Server;
  postgres: Server;
  output(): string;
  exited: Promise<void>;
}

type Defer = (fn: () => Promise<unknown>) => void;

// node:test runs after() hooks in registration order; cleanups must run in reverse.
function cleanups(t: { after(fn: () => Promise<void>): void }): Defer {
  const stack: Array<() => Promise<unknown>> = [];
  t.after(async () => {
    for (const fn of stack.reverse()) await fn().catch((err: unknown) => console.error('cleanup:', err));
  });
  return (fn) => void stack.push(fn);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function readRecord(dataDir: string, name: string): { pid: number; started: string; owner: { pid: number } } {
  return JSON.parse(readFileSync(path.join(dataDir, `${name}.process.json`), 'utf8'));
}

function stillRuns(server: Server): boolean {
  return processIdentity(server.pid)?.started === server.started;
}

function signalIfSame(server: Server, signal: NodeJS.Signals): void {
  if (stillRuns(server)) process.kill(server.pid, signal);
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

async function startService(dataDir: string, port: number, defer: Defer, extraEnv: Record<string, string> = {}): Promise<Service> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['NATS_URL', 'DATABASE_URL', 'JETCRON_ROLES', 'JETCRON_EMBEDDED_PDEATHSIG', 'PUBLIC_URL']) delete env[name];
  Object.assign(env, { JETCRON_DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', ...extraEnv });
  const boot = spawn(process.execPath, ['scripts/bootstrap.mjs', 'serve'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  for (const stream of [boot.stdout, boot.stderr]) stream?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => boot.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));

  const servers: Server[] = [];
  let servicePid: number | undefined;
  // Whatever the test did, nothing started here may outlive it.
  defer(async () => {
    if (!gone) {
      boot.kill('SIGTERM');
      await Promise.race([exited, sleep(15_000)]);
    }
    if (servicePid !== undefined && processIdentity(servicePid)) process.kill(servicePid, 'SIGKILL');
    if (!gone) boot.kill('SIGKILL');
    // A start that failed half-way may have recorded servers the test never saw.
    for (const name of ['nats-server', 'postgres']) {
      try {
        servers.push(readRecord(dataDir, name));
      } catch {}
    }
    for (const server of servers) signalIfSame(server, 'SIGQUIT');
    await sleep(500);
    for (const server of servers) signalIfSame(server, 'SIGKILL');
  });

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + HEALTHY_WITHIN_MS;
  for (;;) {
    if (gone) throw new Error(`the service exited before it was healthy:\n${output}`);
    if (Date.now() > deadline) throw new Error(`the service was not healthy within ${HEALTHY_WITHIN_MS / 1000} s:\n${output}`);
    const status = await fetch(`${url}/healthz`).then((r) => r.status, () => 0);
    if (status === 200) break;
    await sleep(200);
  }
  const nats = readRecord(dataDir, 'nats-server');
  const postgres = readRecord(dataDir, 'postgres');
  servers.push(nats, postgres);
  servicePid = nats.owner.pid;
  assert.equal(postgres.owner.pid, servicePid, 'one service process started both servers');
  return { boot, pid: servicePid, url, nats, postgres, output: () => output, exited };
}

async function api(service: Service, apiKey: string, method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${service.url}/api/v1${route}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

/** First start, something created through the API, then the service SIGKILLed. */
async function startAndKill(dataDir: string, port: number, defer: Defer, env: Record<string, string>) {
  const first = await startService(dataDir, port, defer, env);
  const apiKey = /API key \(shown only this once\):\s+(\S+)/.exec(first.output())?.[1];
  assert.ok(apiKey, `the first start prints an API key:\n${first.output()}`);
  const created = await api(first, apiKey, 'POST', '/monitors', { name: 'survivor', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 60 });
  assert.equal(created.status, 201, JSON.stringify(created.body));

  process.kill(first.pid, 'SIGKILL');
  await first.exited;
  return { first, apiKey, monitorId: created.body.data.id as string };
}

async function assertDataSurvived(service: Service, apiKey: string, monitorId: string): Promise<void> {
  const found = await api(service, apiKey, 'GET', `/monitors/${monitorId}`);
  assert.equal(found.status, 200, JSON.stringify(found.body));
  assert.equal(found.body.data.name, 'survivor');
}

async function stopCleanly(service: Service, dataDir: string): Promise<void> {
  service.boot.kill('SIGTERM');
  await service.exited;
  assert.equal(stillRuns(service.nats) || stillRuns(service.postgres), false, 'a clean stop stops both servers');
  for (const name of ['nats-server', 'postgres']) {
    assert.throws(() => readRecord(dataDir, name), /ENOENT/, `a clean stop removes the ${name} record`);
  }
}

test('the embedded servers die with a SIGKILLed service, and the next start comes up on the same data', { skip: !canDieWithParent && 'needs Linux and setpriv --pdeathsig', timeout: 300_000 }, async (t) => {
  const defer = cleanups(t);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-leftover-test-'));
  defer(() => rm(dataDir, { recursive: true, force: true }));
  const port = await freePort();

  const { first, apiKey, monitorId } = await startAndKill(dataDir, port, defer, {});
  await until('both embedded servers are gone', () => !stillRuns(first.nats) && !stillRuns(first.postgres), 10_000);

  const second = await startService(dataDir, port, defer);
  assert.doesNotMatch(second.output(), /left running/, 'nothing was left to stop');
  assert.notEqual(second.nats.pid, first.nats.pid);
  await assertDataSurvived(second, apiKey, monitorId);
  await stopCleanly(second, dataDir);
});

test('servers left running by a SIGKILLed service are stopped at the next start (JETCRON_EMBEDDED_PDEATHSIG=0)', { timeout: 300_000 }, async (t) => {
  const defer = cleanups(t);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-leftover-test-'));
  defer(() => rm(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const env = { JETCRON_EMBEDDED_PDEATHSIG: '0' };

  const { first, apiKey, monitorId } = await startAndKill(dataDir, port, defer, env);
  await sleep(500);
  assert.ok(stillRuns(first.nats), 'the nats-server outlived the killed service');
  assert.ok(stillRuns(first.postgres), 'Postgres outlived the killed service');

  const second = await startService(dataDir, port, defer, env);
  assert.match(second.output(), new RegExp(`found a nats-server \\(pid ${first.nats.pid}\\) left running .* by process ${first.pid}, which is gone: stopped it with SIGTERM`));
  assert.match(second.output(), new RegExp(`found a postgres \\(pid ${first.postgres.pid}\\) left running .* by process ${first.pid}, which is gone: stopped it with SIGINT`));
  assert.equal(stillRuns(first.nats), false, 'the leftover nats-server is gone');
  assert.equal(stillRuns(first.postgres), false, 'the leftover Postgres is gone');
  await assertDataSurvived(second, apiKey, monitorId);
  await stopCleanly(second, dataDir);
});
