import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Config, Role } from '../config.ts';
import { connectDb } from '../db/connect.ts';
import { migrate } from '../db/migrations.ts';
import { createEventStore } from '../nats/event-store.ts';
import { createClock } from '../lib/clock.ts';
import { applyStreams } from '../nats/apply-streams.ts';
import { connectNats } from '../nats/connection.ts';
import { answerRollCall } from '../nats/roll-call.ts';
import { bootstrapFirstOrganization } from './first-organization.ts';
import { named, runStoppers, startStores, type Running, type Stopper } from './serve.ts';
import { untilStarted } from '../lib/startup-retry.ts';
import { terminate } from './terminate.ts';

/** What a child tells its parent once its roles run. */
export interface ChildReady {
  type: 'jetcron-ready';
  url: string | undefined;
}

const READY_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 30_000;
const RESTART_DELAYS_MS = [1_000, 2_000, 5_000, 10_000];
/** A child that ran this long before it died starts again after the shortest delay. */
const STABLE_AFTER_MS = 60_000;

interface Child {
  roles: Role[];
  proc: ChildProcess | null;
  url: string | undefined;
  restarts: number;
}

/**
 * `jetcron serve` on more than one core: this process starts the stores (embedded
 * ones when no URLs are set), applies the streams and migrations once, then runs each
 * group of roles in a process of its own (`jetcron serve --roles <group>`), so the
 * API, the dispatchers and the log readers do not share an event loop. A child that
 * dies is started again; the children stop when this process stops, and stop
 * themselves when it is gone (their IPC channel closes, even on SIGKILL).
 */
export async function serveInProcesses(config: Config, log: (m: string) => void): Promise<Running> {
  const stoppers: Stopper[] = [];
  const children: Child[] = config.processes.map((roles) => ({ roles, proc: null, url: undefined, restarts: 0 }));
  let stopping = false;
  try {
    const { embedded, natsUrl, databaseUrl } = await startStores(config, log, stoppers);
    const nats = await untilStarted('connecting to NATS', () => connectNats(natsUrl, 'jetcron serve (parent)'), log);
    stoppers.push(named('NATS connection', () => nats.close()));
    await untilStarted('applying the stream definitions', () => applyStreams(nats, config.streamReplicas), log);
    const { db } = connectDb(databaseUrl, 2);
    stoppers.push(named('Postgres pool', () => db.destroy()));
    await untilStarted('migrating Postgres', () => migrate(db), log);

    const group = `${process.pid}-${randomBytes(4).toString('hex')}`;
    const stopAnswering = answerRollCall(nats, { instance: group, roles: [], group });
    stoppers.push(async () => stopAnswering());
    const env = {
      ...process.env,
      NATS_URL: natsUrl,
      DATABASE_URL: databaseUrl,
      JETCRON_PROCESSES: '1',
      JETCRON_PROCESS_GROUP: group,
    };

    // Each child its own metrics port: the i-th group gets JETCRON_METRICS_PORT + i (0: each a free one).
    const metricsPortOf = (child: Child) =>
      config.metricsPort === undefined ? {} : { JETCRON_METRICS_PORT: String(config.metricsPort && config.metricsPort + children.indexOf(child)) };
    const launch = (child: Child): Promise<void> =>
      new Promise((resolve, reject) => {
        const startedAt = Date.now();
        const proc = spawn(process.execPath, [...process.execArgv, process.argv[1]!, 'serve', '--data-dir', config.dataDir], {
          env: { ...env, JETCRON_ROLES: child.roles.join(','), ...metricsPortOf(child) },
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        child.proc = proc;
        const timer = setTimeout(() => reject(new Error(`the ${child.roles.join(',')} process did not start within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS);
        proc.on('message', (m: ChildReady) => {
          if (m?.type !== 'jetcron-ready') return;
          clearTimeout(timer);
          child.url = m.url;
          resolve();
        });
        proc.once('exit', (code, signal) => {
          clearTimeout(timer);
          child.proc = null;
          const how = signal ? `signal ${signal}` : `code ${code}`;
          if (stopping) return;
          reject(new Error(`the ${child.roles.join(',')} process exited (${how}) while starting`));
          if (Date.now() - startedAt > STABLE_AFTER_MS) child.restarts = 0;
          const delay = RESTART_DELAYS_MS[Math.min(child.restarts++, RESTART_DELAYS_MS.length - 1)]!;
          log(`ERROR the ${child.roles.join(',')} process (pid ${proc.pid}) exited (${how}); starting it again in ${delay / 1000} s`);
          setTimeout(() => {
            if (!stopping) launch(child).then(() => log(`the ${child.roles.join(',')} process runs again`), (e: Error) => log(`ERROR ${e.message}`));
          }, delay).unref();
        });
      });

    stoppers.push(named('role processes', async () => {
      stopping = true;
      await Promise.all(children.map((c) => c.proc && terminate(c.proc, STOP_GRACE_MS)));
    }));
    const firstOrganization = (url: string) =>
      bootstrapFirstOrganization({ store: createEventStore(nats), clock: createClock(config.timeScale), dataDir: config.dataDir, db, baseUrl: `${url}/api/v1`, log });
    const api = config.roles.has('api');
    // Before the API answers, so whoever sees it healthy finds the key printed (a chosen port is known in advance).
    if (embedded && api && config.port !== 0) await firstOrganization(config.publicUrl ?? `http://${config.host}:${config.port}`);
    await Promise.all(children.map(launch));
    const url = children.find((c) => c.roles.includes('api'))?.url;
    log(`roles in ${children.length} processes: ${children.map((c) => `${c.roles.join(',')} (pid ${c.proc?.pid})`).join('; ')}`);
    if (embedded && url && config.port === 0) await firstOrganization(config.publicUrl ?? url);
    const processes = () => children.map((c) => ({ roles: c.roles, pid: c.proc?.pid ?? null }));
    return { url, natsUrl, databaseUrl, stop: () => runStoppers(stoppers, log), processes };
  } catch (err) {
    stopping = true;
    await runStoppers(stoppers, log);
    throw err;
  }
}
