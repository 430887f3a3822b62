import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { commandMentions, processIdentity } from './process-identity.ts';

/**
 * A record of an embedded server this process started, kept in the data dir while it
 * runs: if this process dies without stopping it (SIGKILL, no parent-death signal), the
 * next start on the data dir finds it by this record, never by its name.
 */
interface ServerRecord {
  pid: number;
  /** The server's start time: a later process that reuses the pid differs here. */
  started: string;
  /** The executable; the server's command line names it. */
  binary: string;
  host: string;
  port: number;
  /** The process that started it: while that one runs, the server is in use, not left over. */
  owner: { pid: number; started: string };
}

export interface RecordedServer {
  pid: number;
  binary: string;
  host: string;
  port: number;
}

export interface StopLeftoverOptions {
  /** Sent in turn, each after the one before had `graceMs` to work. */
  signals: readonly NodeJS.Signals[];
  graceMs?: number;
  notice: (line: string) => void;
}

const GRACE_MS = 5_000;
const PORT_WAIT_MS = 5_000;
const POLL_MS = 50;

export function recordFile(dataDir: string, name: string): string {
  return path.join(dataDir, `${name}.process.json`);
}

/** Records a server just spawned; the returned function drops the record (on a clean stop). */
export function recordServer(dataDir: string, name: string, server: RecordedServer): () => void {
  const file = recordFile(dataDir, name);
  const self = processIdentity(server.pid);
  const owner = processIdentity(process.pid);
  if (!self || !owner) return () => {};
  const record: ServerRecord = { ...server, started: self.started, owner: { pid: process.pid, started: owner.started } };
  // Written whole or not at all: a half-written record after a crash would be unreadable.
  writeFileSync(`${file}.tmp`, `${JSON.stringify(record)}\n`);
  renameSync(`${file}.tmp`, file);
  return () => {
    // A later start may have replaced the record with its own server's.
    if (readRecord(file)?.started === record.started) rmSync(file, { force: true });
  };
}

/**
 * Stops the server a dead process left running on this data dir, if the record names one
 * that still runs. A record whose pid is gone or now runs something else is dropped; one
 * whose owner still runs means the data dir is in use, which is an error.
 */
export async function stopLeftover(dataDir: string, name: string, opts: StopLeftoverOptions): Promise<void> {
  const file = recordFile(dataDir, name);
  const record = readRecord(file);
  if (!record) return;
  if (!isRecordedServer(record)) {
    rmSync(file, { force: true });
    return;
  }
  const owner = processIdentity(record.owner.pid);
  if (owner?.started === record.owner.started) {
    throw new Error(`a ${name} (pid ${record.pid}) started by process ${record.owner.pid} is running on ${dataDir}; stop that process first`);
  }
  const t0 = Date.now();
  const sent = await stopProcess(record, opts.signals, opts.graceMs ?? GRACE_MS);
  const portFree = await waitForPort(record.host, record.port, PORT_WAIT_MS);
  rmSync(file, { force: true });
  opts.notice(
    `found a ${name} (pid ${record.pid}) left running on ${dataDir} by process ${record.owner.pid}, which is gone: ` +
      `stopped it with ${sent.join(' then ')} in ${((Date.now() - t0) / 1000).toFixed(1)} s` +
      (portFree ? '' : `; port ${record.port} is still taken`),
  );
}

function readRecord(file: string): ServerRecord | undefined {
  try {
    const record = JSON.parse(readFileSync(file, 'utf8')) as ServerRecord;
    return Number.isInteger(record.pid) && typeof record.started === 'string' ? record : undefined;
  } catch {
    return undefined;
  }
}

function isRecordedServer(record: ServerRecord): boolean {
  const now = processIdentity(record.pid);
  return now !== undefined && now.started === record.started && commandMentions(now, record.binary);
}

async function stopProcess(record: ServerRecord, signals: readonly NodeJS.Signals[], graceMs: number): Promise<NodeJS.Signals[]> {
  const sent: NodeJS.Signals[] = [];
  for (const signal of signals) {
    // Checked before every signal: once it is gone its pid may go to another process.
    if (!isRecordedServer(record)) return sent;
    try {
      process.kill(record.pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return sent;
      throw new Error(`cannot stop the ${record.binary} (pid ${record.pid}) left running: ${(err as Error).message}`);
    }
    sent.push(signal);
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline) {
      if (!isRecordedServer(record)) return sent;
      await sleep(POLL_MS);
    }
  }
  if (isRecordedServer(record)) throw new Error(`the ${record.binary} (pid ${record.pid}) left running did not stop after ${sent.join(', ')}`);
  return sent;
}

async function waitForPort(host: string, port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await tryListen(host, port);
    if (state !== 'taken') return true;
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}

// 'other': the port cannot be probed (address gone, no permission); waiting would not help.
function tryListen(host: string, port: number): Promise<'free' | 'taken' | 'other'> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE' ? 'taken' : 'other'));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve('free')));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
