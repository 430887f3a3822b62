import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApiKey } from '../../src/commands/api-key/handlers.ts';
import { changePlan, createOrganization } from '../../src/commands/organization/handlers.ts';
import { loadConfig } from '../../src/config.ts';
import { createEventStore } from '../../src/nats/event-store.ts';
import { createClock } from '../../src/lib/clock.ts';
import { connectNats } from '../../src/nats/connection.ts';
import { serve, type Running } from '../../src/runtime/serve.ts';
import { startTestNats } from './nats.ts';
import { createTestDatabase } from './postgres.ts';

export { eventually } from './wait.ts';

export interface TestService {
  url: string;
  natsUrl: string;
  databaseUrl: string;
  /** A new organization with an API key; `plan` defaults to free. */
  createOrg(plan?: 'free' | 'pro'): Promise<{ orgId: string; apiKey: string; api: Api }>;
  restart(env?: Record<string, string>): Promise<void>;
  /** Stops the service only (NATS and Postgres stay), for restart tests. */
  stopService(): Promise<void>;
  startService(env?: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

export type Api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<{ status: number; body: any; headers: Headers }>;

const log = process.env.JETCRON_TEST_LOG ? (m: string) => process.stderr.write(`[svc] ${m}\n`) : () => {};
/** Where a test's second in-process service logs: stderr with JETCRON_TEST_LOG set, else nowhere. */
export const secondLog = process.env.JETCRON_TEST_LOG ? (m: string) => process.stderr.write(`[second] ${m}\n`) : () => {};

export interface TestServiceOptions {
  /** Run against these NATS servers (comma-separated, e.g. a test cluster) instead of a fresh nats-server; stop() leaves them running. */
  natsUrl?: string;
  /** Where the service's log lines go (default: stderr with JETCRON_TEST_LOG set, else nowhere). */
  log?: (m: string) => void;
}

export async function startTestService(env: Record<string, string> = {}, opts: TestServiceOptions = {}): Promise<TestService> {
  const nats = opts.natsUrl ? { url: opts.natsUrl, stop: async () => {} } : await startTestNats();
  const db = await createTestDatabase();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-svc-'));
  let running: Running | undefined;
  let baseEnv = env;

  const startService = async (extra: Record<string, string> = {}) => {
    baseEnv = { ...baseEnv, ...extra };
    const config = loadConfig(
      {
        NATS_URL: nats.url,
        DATABASE_URL: db.url,
        PORT: '0',
        JETCRON_ALLOW_PRIVATE_TARGETS: '1',
        JETCRON_RATE_LIMIT_FREE: '0',
        JETCRON_RATE_LIMIT_PRO: '0',
        // A script's save check and hooks run under a wall-clock limit, which a busy machine
        // can make a trivial script miss at the contract's 100 ms: the tests' verdicts must
        // not depend on the machine's speed, so their limit is 1 s (the limit's own tests use
        // busy loops, which miss any limit; the 100 ms default is checked in script-engine).
        JETCRON_SCRIPT_TIMEOUT_MS: '1000',
        ...baseEnv,
      },
      { dataDir },
    );
    running = await serve(config, opts.log ?? log);
    svc.url = running.url!;
  };
  const stopService = async () => {
    await running?.stop();
    running = undefined;
  };

  const svc: TestService = {
    url: '',
    natsUrl: nats.url,
    databaseUrl: db.url,
    startService,
    stopService,
    async restart(extra) {
      await stopService();
      await startService(extra);
    },
    async createOrg(plan = 'free') {
      const conn = await connectNats(nats.url, 'test admin');
      try {
        const deps = { store: createEventStore(conn), clock: createClock(1) };
        const org = await createOrganization(deps, `test-${Math.random().toString(36).slice(2, 8)}`, 'free');
        if (plan === 'pro') await changePlan(deps, org.state!.id, 'pro');
        const key = await createApiKey(deps, org.state!.id);
        return { orgId: org.state!.id, apiKey: key.apiKey, api: apiClient(() => svc.url, key.apiKey) };
      } finally {
        await conn.close();
      }
    },
    async stop() {
      await stopService();
      await db.drop();
      await nats.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  await startService();
  return svc;
}

export function apiClient(base: () => string, apiKey: string | null): Api {
  return async (method, p, body, headers = {}) => {
    const res = await fetch(`${base()}/api/v1${p}`, {
      method,
      headers: {
        ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}),
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      // A stuck service fails the test instead of hanging it.
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}
