/**
 * Processes and resources the benchmarks run against: a shared Postgres (one
 * database per benchmark), a nats-server per benchmark, the jetcron service as
 * a child process, the target server as a forked child, and a /proc sampler
 * that tells which of them used the CPU. Everything started here is registered
 * for cleanup, both on the normal path and at process exit.
 */
import { execFile, execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { request } from 'undici';
import { startEmbeddedNats } from '../src/runtime/embedded-nats.ts';
import { startEmbeddedPostgres } from '../src/runtime/embedded-postgres.ts';
import { PG_STATEMENTS_SETTINGS, pgStatementsAsked } from './pg-statements.ts';
import type { LaneRecord, SchedRecord, TargetCommand, TargetStats } from './target-server.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS_DIR = path.join(ROOT, 'bench', 'results');

export const hrMs = (): number => Number(process.hrtime.bigint()) / 1e6;
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- cleanup

type Cleanup = { name: string; run: () => Promise<void>; sync: () => void };
const cleanups: Cleanup[] = [];
let exitHooked = false;

/** Registers a resource: `run` on the normal path (newest first), `sync` at exit if still registered. */
export function onCleanup(name: string, run: () => Promise<void>, sync: () => void): () => Promise<void> {
  const entry: Cleanup = { name, run, sync };
  cleanups.push(entry);
  hookExit();
  let done: Promise<void> | undefined;
  return () => {
    done ??= (async () => {
      const i = cleanups.indexOf(entry);
      if (i !== -1) cleanups.splice(i, 1);
      await run();
    })();
    return done;
  };
}

export async function cleanupAll(): Promise<void> {
  while (cleanups.length) {
    const c = cleanups.pop()!;
    await c.run().catch((e: Error) => console.error(`cleanup ${c.name}: ${e.message}`));
  }
}

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  // Last resort: synchronous kills and removals, newest first.
  process.on('exit', () => {
    for (const c of cleanups.reverse()) {
      try {
        c.sync();
      } catch {
        /* best effort */
      }
    }
  });
  // Interrupted: no graceful stops (a loaded service can take long to drain); the exit hook kills and removes everything.
  const onSignal = (sig: NodeJS.Signals) => {
    console.error(`\nbench: ${sig}, killing child processes and removing temporary files`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

export function tempDir(prefix: string): { dir: string; remove: () => Promise<void> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), `jetcron-bench-${prefix}-`));
  const rm = () => rmSync(dir, { recursive: true, force: true });
  const remove = onCleanup(`rm ${dir}`, async () => rm(), rm);
  return { dir, remove };
}

// ---------------------------------------------------------------- child processes

function killTree(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  try {
    child.kill(signal);
  } catch {
    /* gone */
  }
}

async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  killTree(child, 'SIGTERM');
  const timer = setTimeout(() => killTree(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

// ---------------------------------------------------------------- Postgres

export interface SharedPostgres {
  adminUrl: string;
  postmasterPid(): number | undefined;
  version: string;
  createDatabase(prefix: string): Promise<{ url: string; drop: () => Promise<void> }>;
}

export async function startSharedPostgres(): Promise<SharedPostgres> {
  const { dir } = tempDir('pg');
  // As root, Postgres runs as `postgres`, which must be able to enter the directory.
  execFileSync('chmod', ['0755', dir]);
  // BENCH_PG_STATEMENTS=1: what each statement cost, for a benchmark that reads pg_stat_statements (bench/pg-statements.ts).
  const server = await startEmbeddedPostgres({ dataDir: dir, settings: pgStatementsAsked() ? PG_STATEMENTS_SETTINGS : [] });
  const pidFile = path.join(dir, 'postgres', 'postmaster.pid');
  // At exit: fast shutdown and wait for it, before the data dir is removed (cleanups run newest first).
  onCleanup('postgres', () => server.stop(), () => {
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGINT');
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const deadline = Date.now() + 5000;
    while (existsSync(pidFile) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 20);
  });
  const admin = new URL(server.url);
  admin.pathname = '/postgres';
  const adminUrl = admin.href;
  const version = await withClient(adminUrl, async (c) => (await c.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?');
  return {
    adminUrl,
    version,
    postmasterPid() {
      try {
        return Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      } catch {
        return undefined;
      }
    },
    async createDatabase(prefix) {
      const name = `bench_${prefix.replace(/[^a-z0-9]/g, '_')}_${randomBytes(3).toString('hex')}`;
      await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      const drop = onCleanup(
        `drop ${name}`,
        async () => void (await withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`))),
        () => {},
      );
      return { url: url.href, drop };
    },
  };
}

export async function withClient<T>(url: string, use: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------- NATS

export interface BenchNats {
  url: string;
  pid(): number | undefined;
  stop(): Promise<void>;
}

/** env: added to the server's environment; log: each line it writes; profPort: Go's pprof served there. */
export async function startNats(opts: { env?: Record<string, string>; log?: (line: string) => void; profPort?: number } = {}): Promise<BenchNats> {
  const { dir, remove } = tempDir('nats');
  const n = await startEmbeddedNats({ dataDir: dir, preferredPort: 0, env: opts.env, log: opts.log, profPort: opts.profPort });
  const pidFile = path.join(dir, 'nats.pid');
  const stop = onCleanup('nats-server', async () => {
    await n.stop();
    await remove();
  }, () => process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL'));
  return {
    url: n.url,
    pid() {
      try {
        return Number(readFileSync(pidFile, 'utf8').trim());
      } catch {
        return undefined;
      }
    },
    stop,
  };
}

export function natsServerVersion(): string {
  try {
    return execFileSync('nats-server', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return '?';
  }
}

// ---------------------------------------------------------------- target server

/**
 * Samples every 250 ms how many distinct requests the target has received (times
 * relative to `t0`, hr ms), until `stop()`: the arrival curve of a run.
 */
export function sampleTargetArrivals(target: Pick<Target, 'stats'>, t0: number) {
  const samples: { t: number; n: number }[] = [];
  let on = true;
  const done = (async () => {
    while (on) {
      const at = hrMs();
      const st = await target.stats().catch(() => undefined);
      if (st) samples.push({ t: at - t0, n: st.unique });
      await sleep(250);
    }
  })();
  return {
    samples,
    async stop(): Promise<void> {
      on = false;
      await done;
    },
  };
}

export interface Target {
  url: string;
  pid: number;
  reset(): Promise<void>;
  stats(arrivals?: boolean): Promise<TargetStats>;
  /** Every request that carried `?lane=…&i=…`, in arrival order, with arrival and response-written times. */
  lanes(): Promise<LaneRecord[]>;
  /** Every request that carried `?sched=<i>`, repeats included: [i, wall ms]. */
  scheds(): Promise<SchedRecord[]>;
  /** While on, a request carrying `outage=1` gets 200 with the body `down` (a task expecting `ok` fails; its host counts no failure). */
  outage(on: boolean): Promise<void>;
  stop(): Promise<void>;
}

/** The target server; `plain`: records nothing, answers 200 `{"ok":true}` (target-server.ts). */
export async function startTarget(opts: { plain?: boolean } = {}): Promise<Target> {
  const child = fork(path.join(ROOT, 'bench', 'target-server.ts'), opts.plain ? ['--plain'] : [], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const stop = onCleanup('target', () => stopChild(child, 3000), () => killTree(child, 'SIGKILL'));
  const pending = new Map<number, (m: any) => void>();
  let nextId = 1;
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('target server did not start within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`target server exited (${code})`)));
    child.on('message', (m: any) => {
      if (m?.ready) {
        clearTimeout(t);
        resolve(m.port as number);
      } else if (typeof m?.id === 'number') {
        pending.get(m.id)?.(m);
        pending.delete(m.id);
      }
    });
  });
  const ask = <T>(msg: { cmd: 'reset' } | { cmd: 'stats'; arrivals: boolean } | { cmd: 'lanes' } | { cmd: 'scheds' } | { cmd: 'outage'; on: boolean }): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const t = setTimeout(() => (pending.delete(id), reject(new Error(`target did not answer ${msg.cmd}`))), 30_000);
      pending.set(id, (m) => (clearTimeout(t), resolve(m as T)));
      child.send({ ...msg, id } satisfies TargetCommand);
    });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async reset() {
      await ask({ cmd: 'reset' });
    },
    async stats(arrivals = false) {
      return (await ask<{ stats: TargetStats }>({ cmd: 'stats', arrivals })).stats;
    },
    async lanes() {
      return (await ask<{ lanes: LaneRecord[] }>({ cmd: 'lanes' })).lanes;
    },
    async scheds() {
      return (await ask<{ scheds: SchedRecord[] }>({ cmd: 'scheds' })).scheds;
    },
    async outage(on: boolean) {
      await ask({ cmd: 'outage', on });
    },
    stop,
  };
}

// ---------------------------------------------------------------- jetcron service

export interface Service {
  url: string;
  pid: number;
  logFile: string;
  /** Log lines that look like trouble (errors, retries, restarts). */
  troubleLines(): string[];
  stop(): Promise<void>;
}

export interface ServiceOptions {
  name: string;
  natsUrl: string;
  databaseUrl: string;
  /** Directory for a V8 CPU profile of the service (node --cpu-prof), or none. */
  cpuProfDir?: string | undefined;
  env?: Record<string, string>;
  /** The node binary to run the service on (default: the bench's own). */
  node?: string | undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

export async function startService(opts: ServiceOptions): Promise<Service> {
  const { dir } = tempDir('svc');
  const logDir = path.join(RESULTS_DIR, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logFile = path.join(logDir, `${opts.name}.service.log`);
  const fd = openSync(logFile, 'w');
  const port = await freePort();
  // One profile per thread, so one directory per benchmark.
  const profDir = opts.cpuProfDir ? path.join(opts.cpuProfDir, opts.name) : undefined;
  const nodeArgs = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  if (profDir) mkdirSync(profDir, { recursive: true });
  const child = spawn(opts.node ?? process.execPath, [...nodeArgs, path.join(ROOT, 'bin', 'jetcron.mjs'), 'serve', '--data-dir', dir], {
    cwd: ROOT,
    env: {
      ...process.env,
      NATS_URL: opts.natsUrl,
      DATABASE_URL: opts.databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      JETCRON_ALLOW_PRIVATE_TARGETS: '1',
      JETCRON_RATE_LIMIT_FREE: '0',
      JETCRON_RATE_LIMIT_PRO: '0',
      JETCRON_ROLES: '',
      // Node flags for the service alone (runtime experiments), not the load generator.
      ...(process.env.BENCH_SERVICE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS } : {}),
      ...opts.env,
    },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  // 15 s: the service gives in-flight dispatches 10 s before it hands them back.
  const stop = onCleanup(`service ${opts.name}`, () => stopChild(child, 15_000), () => killTree(child, 'SIGKILL'));
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  child.once('exit', () => (exited = true));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`jetcron serve exited during start; see ${logFile}:\n${tail(logFile, 20)}`);
    try {
      const res = await request(`${url}/healthz`, { headersTimeout: 2000, bodyTimeout: 2000 });
      await res.body.dump();
      if (res.statusCode === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error(`jetcron serve not healthy within 60 s; see ${logFile}`);
    await sleep(100);
  }
  return {
    url,
    pid: child.pid!,
    logFile,
    troubleLines() {
      const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
      return text.split('\n').filter((l) => /error|fail|retry|restarting|warn|timeout|unhandled/i.test(l));
    },
    stop,
  };
}

function tail(file: string, n: number): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

/** `jetcron org create` through the CLI, as an operator would; returns the API key. */
export async function createOrg(natsUrl: string, plan: 'free' | 'pro' = 'free'): Promise<{ orgId: string; apiKey: string }> {
  const { dir, remove } = tempDir('cli');
  try {
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        [path.join(ROOT, 'bin', 'jetcron.mjs'), 'org', 'create', '--name', 'bench', '--plan', plan, '--data-dir', dir],
        { cwd: ROOT, env: { ...process.env, NATS_URL: natsUrl }, timeout: 60_000 },
        (err, out, errOut) => (err ? reject(new Error(`org create failed: ${err.message}\n${errOut}`)) : resolve(out)),
      );
    });
    const line = stdout.trim().split('\n').pop() ?? '';
    const parsed = JSON.parse(line) as { org_id: string; api_key: string };
    return { orgId: parsed.org_id, apiKey: parsed.api_key };
  } finally {
    await remove();
  }
}

// ---------------------------------------------------------------- CPU accounting via /proc

let clkTck: number | undefined;
function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

function readStat(pid: number, tid?: number): { ppid: number; ticks: number } | undefined {
  try {
    const s = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return undefined;
  }
}

function processTable(): Map<number, { ppid: number; ticks: number }> {
  const out = new Map<number, { ppid: number; ticks: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(Number(name));
    if (s) out.set(Number(name), s);
  }
  return out;
}

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

export interface CpuGroup {
  name: string;
  /** Root pid, resolved at sample time; undefined = skip. */
  pid: () => number | undefined;
  withDescendants: boolean;
  /** Also report the root's main thread alone (a Node process's event loop; the rest is GC, JIT, libuv, loader threads). */
  mainThread?: boolean;
  /** Also report each direct child of the root with its descendants, named by its roles (`JETCRON_ROLES`, as a split `serve` starts them), and its main thread. */
  byChild?: boolean;
}

/** A child process's name for the CPU table: its roles (`JETCRON_ROLES`, as a split `serve` starts them), else its pid. */
function childLabel(pid: number): string {
  try {
    const roles = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((v) => v.startsWith('JETCRON_ROLES='));
    return roles ? `process ${roles.slice('JETCRON_ROLES='.length)}` : `process ${pid}`;
  } catch {
    return `process ${pid}`;
  }
}

export interface CpuRow {
  name: string;
  /** A breakdown line of the row above it (e.g. its main thread). */
  detail?: boolean;
  cpuSeconds: number;
  /** Percent of one core over the phase. */
  pctOfCore: number;
}

export interface CpuReport {
  wallSeconds: number;
  rows: CpuRow[];
  /** Percent of all cores busy (from /proc/stat), any process. */
  machineBusyPct: number;
}

/** Snapshot now; call the result at the end of the phase for per-group CPU use. */
export function cpuPhase(groups: CpuGroup[]): () => CpuReport {
  const pidsOf = (table: Map<number, { ppid: number; ticks: number }>, g: CpuGroup): number[] => {
    const root = g.pid();
    if (root === undefined || !table.has(root)) return [];
    const out = [root];
    if (g.withDescendants) {
      for (let i = 0; i < out.length; i++) {
        for (const [pid, s] of table) if (s.ppid === out[i]) out.push(pid);
      }
    }
    return out;
  };
  const mainTicks = (g: CpuGroup): number | undefined => {
    const pid = g.mainThread ? g.pid() : undefined;
    return pid === undefined ? undefined : readStat(pid, pid)?.ticks;
  };
  const t0 = hrMs();
  const before = processTable();
  const mainBefore = groups.map(mainTicks);
  // The main threads of the children of groups reported by child.
  const mainThreadBefore = new Map<number, number>();
  for (const g of groups) {
    const root = g.byChild ? g.pid() : undefined;
    if (root === undefined) continue;
    for (const [pid, st] of before) {
      const ticks = st.ppid === root ? readStat(pid, pid)?.ticks : undefined;
      if (ticks !== undefined) mainThreadBefore.set(pid, ticks);
    }
  }
  const m0 = machineTicks();
  return () => {
    const after = processTable();
    const mainAfter = groups.map(mainTicks);
    const m1 = machineTicks();
    const wallSeconds = (hrMs() - t0) / 1000;
    const hz = ticksPerSecond();
    const pct = (cpuSeconds: number) => (wallSeconds > 0 ? (100 * cpuSeconds) / wallSeconds : 0);
    const rows: CpuRow[] = [];
    groups.forEach((g, i) => {
      let ticks = 0;
      for (const pid of pidsOf(after, g)) ticks += after.get(pid)!.ticks - (before.get(pid)?.ticks ?? 0);
      rows.push({ name: g.name, cpuSeconds: ticks / hz, pctOfCore: pct(ticks / hz) });
      const a = mainAfter[i];
      const b = mainBefore[i];
      if (a !== undefined && b !== undefined) rows.push({ name: '  of which its main thread (event loop)', detail: true, cpuSeconds: (a - b) / hz, pctOfCore: pct((a - b) / hz) });
      const root = g.byChild ? g.pid() : undefined;
      if (root !== undefined) {
        for (const [child, st] of after) {
          if (st.ppid !== root) continue;
          let t = 0;
          for (const pid of pidsOf(after, { ...g, pid: () => child })) t += after.get(pid)!.ticks - (before.get(pid)?.ticks ?? 0);
          const label = childLabel(child);
          rows.push({ name: `  of which ${label}`, detail: true, cpuSeconds: t / hz, pctOfCore: pct(t / hz) });
          const m0c = mainThreadBefore.get(child);
          const m1c = readStat(child, child)?.ticks;
          if (m0c !== undefined && m1c !== undefined) rows.push({ name: `    ${label}: its main thread`, detail: true, cpuSeconds: (m1c - m0c) / hz, pctOfCore: pct((m1c - m0c) / hz) });
        }
      }
    });
    const total = m1.total - m0.total;
    const ours = rows.filter((r) => !r.detail).reduce((a, r) => a + r.cpuSeconds, 0);
    const others = Math.max(0, (m1.busy - m0.busy) / hz - ours);
    rows.push({ name: 'other processes on the machine', cpuSeconds: others, pctOfCore: wallSeconds > 0 ? (100 * others) / wallSeconds : 0 });
    return { wallSeconds, rows, machineBusyPct: total > 0 ? (100 * (m1.busy - m0.busy)) / total : 0 };
  };
}

/**
 * Forks `bench/<file>` (a server or reader of a benchmark's own) with `args` and `env`, and
 * waits (30 s at most) for its first IPC message, its "ready" (what it says, e.g. its port);
 * `stop` ends it (SIGTERM) and is also run at exit.
 */
export async function forkBenchChild(file: string, args: string[], env?: Record<string, string>): Promise<{ child: ChildProcess; ready: any; stop: () => Promise<void> }> {
  const child = fork(path.join(ROOT, 'bench', file), args, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], ...(env ? { env: { ...process.env, ...env } } : {}) });
  const kill = () => void (child.exitCode === null && child.kill('SIGKILL'));
  const stop = onCleanup(file, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    await gone;
  }, kill);
  const ready = await new Promise<any>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${file} did not start within 30 s`)), 30_000);
    child.once('exit', (code) => reject(new Error(`${file} exited (${code})`)));
    child.once('message', (m) => (clearTimeout(t), resolve(m)));
  });
  return { child, ready, stop };
}
