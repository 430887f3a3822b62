import { onChildLines } from './child-lines.ts';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApiKey } from '../../src/commands/api-key/handlers.ts';
import { changePlan, createOrganization } from '../../src/commands/organization/handlers.ts';
import { createEventStore } from '../../src/nats/event-store.ts';
import { createClock } from '../../src/lib/clock.ts';
import { connectNats, type Nats } from '../../src/nats/connection.ts';
import { dieWithParent } from '../../src/runtime/die-with-parent.ts';
import { eventually } from './service.ts';
import { eventsOf } from '../../src/commands/commit.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface JetcronProcess {
  pid: number;
  label: string;
  /** The API's base URL (no /api/v1) once it listens; undefined for a process without the api role. */
  url: string | undefined;
  /** Everything it printed, each line prefixed with its label. */
  lines: string[];
  /** Whether it has exited (killed or otherwise). */
  exited(): boolean;
  /** SIGKILL (kill -9); resolves once the process is gone. */
  kill9(): Promise<void>;
  /** SIGKILL if still running, then removes its data dir; safe to call twice. */
  cleanup(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `jetcron serve --roles <roles> --processes 1` as a real child process on the given
 * NATS and Postgres (its own data dir). Resolves once it runs: for a process with the
 * api role, once the API listens; otherwise at once (a dispatcher takes jobs as soon
 * as it is up, and the tests wait for the effects). Dies with the test process
 * (SIGKILL through setpriv) should the test itself die.
 */
export async function spawnJetcron(opts: { roles: string; natsUrl: string; databaseUrl: string; label: string; env?: Record<string, string> }): Promise<JetcronProcess> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `jetcron-test-${opts.label}-`));
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['NATS_URL', 'DATABASE_URL', 'JETCRON_ROLES', 'JETCRON_PROCESS_GROUP', 'JETCRON_PROCESSES', 'JETCRON_DATA_DIR', 'PORT', 'HOST']) delete env[name];
  Object.assign(env, {
    NATS_URL: opts.natsUrl,
    DATABASE_URL: opts.databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    JETCRON_ALLOW_PRIVATE_TARGETS: '1',
    JETCRON_RATE_LIMIT_FREE: '0',
    JETCRON_RATE_LIMIT_PRO: '0',
    ...opts.env,
  });
  const cmd = dieWithParent(process.execPath, [path.join(ROOT, 'bin/jetcron.mjs'), 'serve', '--roles', opts.roles, '--processes', '1', '--data-dir', dataDir], 'SIGKILL');
  const child = spawn(cmd.file, cmd.args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let url: string | undefined;
  const t0 = Date.now();
  onChildLines(child, (l) => {
    lines.push(`[${opts.label} +${((Date.now() - t0) / 1000).toFixed(2)}s] ${l}`);
    if (process.env.JETCRON_TEST_LOG) process.stderr.write(`${lines.at(-1)}\n`);
    url ??= /jetcron API listening on (http:\/\/\S+)\/api\/v1/.exec(l)?.[1];
  });
  const exit = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      lines.push(`[${opts.label}] exited: ${signal ?? code}`);
      resolve();
    });
    child.once('error', (err) => {
      lines.push(`[${opts.label}] spawn error: ${err.message}`);
      resolve();
    });
  });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const kill9 = async () => {
    if (!gone()) child.kill('SIGKILL');
    await Promise.race([exit, sleep(10_000)]);
  };
  let cleaned: Promise<void> | undefined;
  const proc: JetcronProcess = {
    pid: child.pid!,
    label: opts.label,
    get url() {
      return url;
    },
    lines,
    exited: gone,
    kill9,
    cleanup() {
      cleaned ??= (async () => {
        await kill9();
        rmSync(dataDir, { recursive: true, force: true });
      })();
      return cleaned;
    },
  };
  if (opts.roles.split(',').includes('api')) {
    try {
      await eventually(async () => {
        if (gone()) throw new Error(`${opts.label} exited before its API listened:\n${lines.slice(-20).join('\n')}`);
        return url;
      }, 45_000, 50);
    } catch (err) {
      await proc.cleanup();
      throw err;
    }
  }
  return proc;
}

/** A new organization with an API key, written straight to the log (as the CLI's `org create`). */
export async function createOrgWithKey(natsUrl: string, plan: 'free' | 'pro' = 'pro'): Promise<{ orgId: string; apiKey: string; webhookSecret: string }> {
  const conn = await connectNats(natsUrl, 'test admin');
  try {
    const deps = { store: createEventStore(conn), clock: createClock(1) };
    const org = await createOrganization(deps, `test-${Math.random().toString(36).slice(2, 8)}`, 'free');
    if (plan === 'pro') await changePlan(deps, org.state!.id, 'pro');
    const key = await createApiKey(deps, org.state!.id);
    return { orgId: org.state!.id, apiKey: key.apiKey, webhookSecret: org.state!.webhook_secret };
  } finally {
    await conn.close();
  }
}

export interface LoggedEvent {
  seq: number;
  subject: string;
  event: { type: string; id: string; data: Record<string, any> };
}

/** Every EVENTS message on `filter` (a subject or one wildcard filter: nats-server 2.9 takes one), in stream order. */
export async function readEvents(nats: Nats, filter: string): Promise<LoggedEvent[]> {
  const out: LoggedEvent[] = [];
  const consumer = await nats.js.consumers.get('EVENTS', { filter_subjects: filter });
  const info = await consumer.info(true);
  let left = info.num_pending;
  while (left > 0) {
    const batch = await consumer.fetch({ max_messages: Math.min(left, 1000), expires: 5000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      out.push({ seq: m.seq, subject: m.subject, event: m.json() });
      left = m.info.pending;
    }
    if (got === 0) throw new Error(`reading ${filter}: no messages within 5 s with ${left} pending`);
  }
  return out;
}

/**
 * Every recorded event of the organization's executions, in stream order, wherever the
 * dispatch mode put them: on each execution's own subject (DISPATCH), or inside the
 * partition owners' commits (one message, many events: `subject` is the commit's).
 */
export async function readExecutionEvents(nats: Nats, orgId: string): Promise<LoggedEvent[]> {
  const out: LoggedEvent[] = [];
  for (const m of [...(await readEvents(nats, `evt.${orgId}.exec.>`)), ...(await readEvents(nats, 'evt.partition.>'))]) {
    for (const event of eventsOf<LoggedEvent['event'] & { org_id: string; at: string }>(m.event)) {
      if (event.org_id === orgId && typeof event.data?.execution_id === 'string') out.push({ seq: m.seq, subject: m.subject, event });
    }
  }
  return out.sort((a, b) => a.seq - b.seq);
}
