import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { dieWithParent } from './die-with-parent.ts';
import { recordServer, stopLeftover } from './leftovers.ts';
import { terminate } from './terminate.ts';
import { commandMentions, processIdentity } from './process-identity.ts';
import { natsServerEnv } from './nats-memory-limit.ts';

export interface EmbeddedNats {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedNatsOptions {
  dataDir: string;
  host?: string;
  preferredPort?: number;
  /** The server's own output. */
  log?: (line: string) => void;
  /** Lines about the server's lifecycle, such as a leftover found and stopped. */
  notice?: (line: string) => void;
  /** false: the server outlives this process if it is killed (test-only, to leave a leftover behind). */
  dieWithParent?: boolean;
  /** Added to this process's environment for the server (the soak bench sets GODEBUG=gctrace=1); GOMEMLIMIT has a default (nats-memory-limit.ts). */
  env?: Record<string, string>;
  /** Serve Go's pprof on this port of 127.0.0.1 (`prof_port`; the soak bench reads heap profiles from it). */
  profPort?: number;
}

const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 10_000;
const START_ATTEMPTS = 3;
const RECORD = 'nats-server';

export function findNatsServer(envPath = process.env.PATH ?? ''): string | undefined {
  const candidates = [...envPath.split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, 'nats-server')), '/usr/sbin/nats-server'];
  return candidates.find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export async function startEmbeddedNats(opts: EmbeddedNatsOptions): Promise<EmbeddedNats> {
  const binary = findNatsServer();
  if (!binary) {
    throw new Error('nats-server not found: install it with `sudo apt-get install -y nats-server` (Debian/Ubuntu) or from https://nats.io');
  }
  const host = opts.host ?? '127.0.0.1';
  const dataDir = path.resolve(opts.dataDir);
  await mkdir(dataDir, { recursive: true });
  // Before picking a port: a leftover may hold the preferred one.
  await stopLeftover(dataDir, RECORD, { signals: ['SIGTERM', 'SIGKILL'], notice: opts.notice ?? (() => {}) });
  await refuseIfAlreadyRunning(dataDir);

  let port = await pickPort(host, opts.preferredPort ?? 4222);
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(binary, dataDir, host, port, opts.log ?? (() => {}), opts.dieWithParent ?? true, opts.env, opts.profPort);
    } catch (err) {
      // The probed port can be taken by someone else before nats-server binds it.
      if (attempt >= START_ATTEMPTS || !(err instanceof PortInUseError)) throw err;
      port = await pickPort(host, 0);
    }
  }
}

class PortInUseError extends Error {}

async function launch(binary: string, dataDir: string, host: string, port: number, log: (line: string) => void, withParent: boolean, env: Record<string, string> | undefined, profPort: number | undefined): Promise<EmbeddedNats> {
  const configFile = path.join(dataDir, 'nats-server.conf');
  await writeFile(configFile, renderConfig(dataDir, host, port, profPort));

  const command = withParent ? dieWithParent(binary, ['-c', configFile], 'SIGTERM') : { file: binary, args: ['-c', configFile] };
  const child = spawn(command.file, command.args, { stdio: ['ignore', 'pipe', 'pipe'], env: natsServerEnv(process.env, env) });
  const tail: string[] = [];
  const onOutput = (chunk: Buffer): void => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      tail.push(line);
      if (tail.length > 30) tail.shift();
      log(line);
    }
  };
  child.stdout?.on('data', onOutput);
  child.stderr?.on('data', onOutput);
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => resolve());
    child.once('error', (err) => {
      tail.push(String(err));
      resolve();
    });
  });
  const forget = child.pid === undefined ? () => {} : recordServer(dataDir, RECORD, { pid: child.pid, binary, host, port });
  const killOnExit = (): void => {
    child.kill('SIGKILL');
    forget();
  };
  process.on('exit', killOnExit);

  const url = `nats://${urlHost(host)}:${port}`;
  try {
    await waitUntilListening(child, exited, urlHost(host), port);
  } catch (err) {
    process.off('exit', killOnExit);
    await terminate(child, STOP_TIMEOUT_MS, exited);
    forget();
    const output = tail.join('\n');
    const message = `nats-server did not start on ${host}:${port}: ${(err as Error).message}\n${output}`;
    throw /address already in use/i.test(output) ? new PortInUseError(message) : new Error(message);
  }

  const urlFile = path.join(dataDir, 'nats.url');
  await writeFile(urlFile, `${url}\n`);
  let stopping: Promise<void> | undefined;
  return {
    url,
    stop() {
      stopping ??= (async () => {
        await terminate(child, STOP_TIMEOUT_MS, exited);
        process.off('exit', killOnExit);
        forget();
        // Another instance may have taken over the data dir's URL file meanwhile.
        const current = await readFile(urlFile, 'utf8').catch(() => '');
        if (current.trim() === url) await rm(urlFile, { force: true });
      })();
      return stopping;
    },
  };
}

function renderConfig(dataDir: string, host: string, port: number, profPort: number | undefined): string {
  return [
    `host: ${JSON.stringify(host)}`,
    `port: ${port}`,
    ...(profPort === undefined ? [] : [`prof_port: ${profPort}`]),
    'max_payload: 8MB',
    `pid_file: ${JSON.stringify(path.join(dataDir, 'nats.pid'))}`,
    'jetstream {',
    `  store_dir: ${JSON.stringify(path.join(dataDir, 'jetstream'))}`,
    '}',
    '',
  ].join('\n');
}

// Two servers sharing one store_dir would corrupt it. Without a record (an older version
// started it) nats.pid still names it; its command line naming this data dir's config
// tells it from an unrelated process that got the pid since.
async function refuseIfAlreadyRunning(dataDir: string): Promise<void> {
  const pid = Number((await readFile(path.join(dataDir, 'nats.pid'), 'utf8').catch(() => '')).trim());
  const running = processIdentity(pid);
  if (running && commandMentions(running, path.join(dataDir, 'nats-server.conf'))) {
    throw new Error(`a nats-server (pid ${pid}) is already running on ${dataDir}; stop it first`);
  }
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

async function pickPort(host: string, preferred: number): Promise<number> {
  try {
    return await probe(host, preferred);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (preferred !== 0 && (code === 'EADDRINUSE' || code === 'EACCES')) return pickPort(host, 0);
    throw new Error(`nats-server cannot listen on ${host}:${preferred}: ${(err as Error).message}`);
  }
}

function probe(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : port;
      server.close(() => resolve(bound));
    });
  });
}

async function waitUntilListening(child: ChildProcess, exited: Promise<void>, host: string, port: number): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (gone) throw new Error(`nats-server exited with code ${child.exitCode ?? child.signalCode}`);
    if (await canConnect(host.replace(/^\[|\]$/g, ''), port)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${READY_TIMEOUT_MS / 1000} s waiting for port ${port}`);
}

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(1000);
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

