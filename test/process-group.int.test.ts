import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/runtime/free-port.ts';
import { parsePrometheusText, sampleValue } from './support/prometheus-text.ts';
import { startTarget } from './support/target.ts';

// `jetcron serve` as a user runs it, with its roles split over processes: one API, one
// dispatcher, one for the log readers, under a parent that owns the embedded stores.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
const rolesOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((v) => v.startsWith('JETCRON_ROLES='))?.slice(14);

async function until<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(100);
  }
}

test('serve splits its roles over processes; a killed role process comes back; all go with the parent', { timeout: 180_000 }, async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-split-'));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, JETCRON_DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', JETCRON_ALLOW_PRIVATE_TARGETS: '1', JETCRON_METRICS_PORT: '0' };
  for (const name of ['NATS_URL', 'DATABASE_URL', 'JETCRON_ROLES', 'JETCRON_PROCESS_GROUP', 'JETCRON_PROCESSES']) delete env[name];
  const serve = spawn(process.execPath, ['bin/jetcron.mjs', 'serve', '--processes', 'api/dispatcher/projector,scheduler,notifier'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  for (const s of [serve.stdout, serve.stderr]) s.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const target = await startTarget();
  t.after(async () => {
    if (serve.exitCode === null) serve.kill('SIGKILL');
    await target.close();
    await sleep(500);
    await rm(dataDir, { recursive: true, force: true });
  });

  const key = await until('the first organization is created', () => output.match(/pk_[a-z0-9]+\.sk_[a-z0-9]+/)?.[0], 120_000);
  const line = await until('every role process runs', () => output.match(/roles in 3 processes: (.*)/)?.[1]);
  const pids = Object.fromEntries([...line.matchAll(/([a-z,]+) \(pid (\d+)\)/g)].map((m) => [m[1]!, Number(m[2])]));
  assert.deepEqual(Object.keys(pids).sort(), ['api', 'dispatcher', 'projector,scheduler,notifier']);
  for (const [roles, pid] of Object.entries(pids)) {
    assert.equal(parentOf(pid), serve.pid, `${roles} runs under the serve process`);
    assert.equal(rolesOf(pid), roles);
  }

  const base = `http://127.0.0.1:${port}/api/v1`;
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    return { status: res.status, body: (await res.json()) as any };
  };
  const runTask = async (tag: string) => {
    const created = await api('POST', '/tasks', { url: `${target.url}/${tag}` });
    assert.equal(created.status, 201);
    // Read-your-writes: the task is there at once, though the write did not wait for the projector.
    assert.equal((await api('GET', `/tasks/${created.body.data.id}`)).status, 200);
    const exe = created.body.data.last_execution_id;
    await until(`${tag} ran`, async () => (await api('GET', `/executions/${exe}`)).body.data?.status === 'success');
  };
  await runTask('first');

  // A bulk retry job advances in the projector's process, never in the API's: a dead letter
  // (its body is not what the task expects) retried by a job, and the line of the process
  // that took the jobs' lease names its roles.
  const dead = await api('POST', '/tasks', { url: `${target.url}/dead`, retry_attempts: 0, expected_body_pattern: 'never in any body' });
  assert.equal(dead.status, 201);
  await until('the dead letter failed', async () => (await api('GET', `/executions/${dead.body.data.last_execution_id}`)).body.data?.status === 'failed');
  const job = await api('POST', '/executions/retry', { filter: { task_id: dead.body.data.id } });
  assert.equal(job.status, 202, JSON.stringify(job.body));
  const finished = await until('the job is done', async () => {
    const j = (await api('GET', `/jobs/${job.body.data.id}`)).body.data;
    return j?.status === 'done' ? j : undefined;
  });
  assert.deepEqual([finished.total, finished.done, finished.skipped], [1, 1, 0]);
  const holders = output.split('\n').filter((l) => l.includes('bulk jobs: this process holds their lease')).map((l) => (JSON.parse(l) as { role: string }).role);
  assert.deepEqual(holders, ['projector,scheduler,notifier']);

  // /healthz in the API process reports the consumers the other processes run.
  // The task partition owners too (the dispatcher process's), each with its lag on EVENTS.
  const reported = ['projector', 'inbound-router', 'notifier', 'owner.0', 'owner.7'];
  const health = await until('every role process reported its consumers', async () => {
    const h = (await (await fetch(`http://127.0.0.1:${port}/healthz`)).json()) as { consumers: Record<string, { state: string; lag?: number }> };
    return reported.every((c) => h.consumers[c]) ? h : undefined;
  });
  for (const c of reported) assert.notEqual(health.consumers[c]!.state, 'standby', c);
  assert.equal(typeof health.consumers['owner.0']!.lag, 'number');

  // Each process serves its own registry: the execution is counted where it ran, in the dispatcher's.
  const metricsUrls = Object.fromEntries([...output.matchAll(/metrics of this process \(([a-z,]+)\) at ([^\s"]+)/g)].map((m) => [m[1]!, m[2]!]));
  assert.deepEqual(Object.keys(metricsUrls).sort(), Object.keys(pids).sort());
  const scrape = async (roles: string) => parsePrometheusText(await (await fetch(metricsUrls[roles]!)).text());
  const executed = { source_type: 'task', status: 'success' };
  assert.equal(sampleValue(await scrape('dispatcher'), 'jetcron_executions_total', executed), 1);
  assert.equal(sampleValue(await scrape('api'), 'jetcron_executions_total', executed), undefined);
  await until('the API process reports the notifier caught up', async () => sampleValue(await scrape('api'), 'jetcron_consumer_lag', { consumer: 'notifier' }) === 0);
  await until('the API process reports a task partition owner caught up', async () => sampleValue(await scrape('api'), 'jetcron_consumer_lag', { consumer: 'owner.3' }) === 0);
  assert.equal((await scrape('dispatcher')).get('jetcron_timers_pending')?.type, 'gauge');

  process.kill(pids.dispatcher!, 'SIGKILL');
  await until('the dispatcher process is started again', () => /the dispatcher process runs again/.test(output));
  await runTask('after-restart');
  // The dead letter and its retry, then the two tasks.
  assert.deepEqual(target.received.map((r) => r.path), ['/first', '/dead', '/dead', '/after-restart']);

  const nats = JSON.parse(readFileSync(path.join(dataDir, 'nats-server.process.json'), 'utf8')).pid as number;
  const children = Object.values(pids).filter((p) => p !== pids.dispatcher);
  serve.kill('SIGKILL');
  await until('the role processes and the embedded nats-server are gone with the parent', () => children.every((p) => !alive(p)) && !alive(nats), 90_000);
});
