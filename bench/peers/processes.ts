/**
 * The peers' processes: queue workers forked (child.ts is their side), and a
 * redis-server for BullMQ. Each is registered with the harness's cleanup, so it is
 * stopped on the normal path and killed at exit after an error or Ctrl-C.
 */
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort, onCleanup, RESULTS_DIR, ROOT, sleep, tempDir } from '../harness.ts';
import type { WorkerConfig, WorkerMessage } from './child.ts';

/** Exited already, or sent `signal` and waited up to `graceMs` before SIGKILL. */
async function ended(child: ChildProcess, signal: NodeJS.Signals | undefined, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (signal) child.kill(signal);
  const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exit;
  clearTimeout(kill);
}

export interface PeerWorker {
  pid: number;
  /** Closes the workers (graceful, bounded) and returns the POST outcomes they counted. */
  stop(): Promise<Record<string, number> | undefined>;
}

/** Forks `bench/peers/<entry>` with `config` and waits (30 s at most) until its workers consume. */
export async function forkWorker<C extends WorkerConfig>(entry: string, config: C): Promise<PeerWorker> {
  const child = fork(path.join(ROOT, 'bench', 'peers', entry), [], {
    cwd: ROOT,
    env: { ...process.env, PEER_WORKER_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let posts: Record<string, number> | undefined;
  child.on('message', (m: WorkerMessage) => {
    if ('stopped' in m) posts = m.posts;
  });
  const stop = onCleanup(
    `worker ${entry}`,
    async () => {
      if (child.connected) child.send({ cmd: 'stop' });
      await ended(child, undefined, 10_000);
    },
    () => void child.kill('SIGKILL'),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${entry} did not start within 30 s`)), 30_000);
      const settle = (err?: Error) => (clearTimeout(timer), err ? reject(err) : resolve());
      child.once('exit', (code) => settle(new Error(`${entry} exited (${code}) during start`)));
      child.on('message', (m: WorkerMessage) => {
        if ('ready' in m) settle();
        if ('failed' in m) settle(new Error(`${entry}: ${m.failed}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { pid: child.pid!, stop: async () => (await stop(), posts) };
}

// ---------------------------------------------------------------- redis-server

function onPath(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/usr/bin'];
  return dirs
    .map((dir) => path.join(dir, name))
    .find((file) => {
      try {
        accessSync(file, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
}

/**
 * redis-server's path; when missing and running as root on Debian/Ubuntu, installs
 * Debian's package first (apt-get update only if the install fails without it).
 * Returns the reason instead when there is none.
 */
export function redisServer(log: (m: string) => void): { file: string } | { missing: string } {
  const found = onPath('redis-server');
  if (found) return { file: found };
  if (process.getuid?.() !== 0 || !onPath('apt-get')) return { missing: 'redis-server is not on PATH (install it with `apt-get install redis-server`)' };
  const apt = (args: string[]) => execFileSync('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, stdio: ['ignore', 'ignore', 'pipe'], timeout: 300_000 });
  try {
    log('peers: redis-server not found; apt-get install -y redis-server');
    try {
      apt(['install', '-y', '-qq', 'redis-server']);
    } catch {
      apt(['update', '-qq']);
      apt(['install', '-y', '-qq', 'redis-server']);
    }
  } catch (err) {
    return { missing: `redis-server is not on PATH and apt-get install redis-server failed: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim().split('\n').pop()}` };
  }
  const installed = onPath('redis-server');
  return installed ? { file: installed } : { missing: 'redis-server is still not on PATH after apt-get install redis-server' };
}

export interface BenchRedis {
  port: number;
  pid: number;
  version: string;
  /** FLUSHALL: a fresh, empty server for the next round. */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** redis-server on a free loopback port, no persistence (`--save '' --appendonly no`), log in bench/results/logs/. */
export async function startRedis(file: string): Promise<BenchRedis> {
  const { dir, remove } = tempDir('redis');
  const port = await freePort();
  mkdirSync(path.join(RESULTS_DIR, 'logs'), { recursive: true });
  const fd = openSync(path.join(RESULTS_DIR, 'logs', 'peers.redis.log'), 'w');
  const child = spawn(file, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  client.on('error', () => {});
  const stop = onCleanup(
    'redis-server',
    async () => {
      client.disconnect();
      await ended(child, 'SIGTERM', 5000);
      await remove();
    },
    () => void child.kill('SIGKILL'),
  );
  try {
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}) during start; see bench/results/logs/peers.redis.log`);
      if ((await client.ping().catch(() => '')) === 'PONG') break;
      if (Date.now() > deadline) throw new Error('redis-server did not answer PING within 15 s');
      await sleep(100);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const info = await client.info('server');
  return {
    port,
    pid: child.pid!,
    version: /redis_version:(\S+)/.exec(info)?.[1] ?? '?',
    async flush() {
      await client.flushall();
    },
    stop,
  };
}
