import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism } from 'node:os';
import type { ChildReady } from '../runtime/process-group.ts';
import type { Running } from '../runtime/serve.ts';
import { createApiKey, revokeApiKey } from '../commands/api-key/handlers.ts';
import { changePlan, createOrganization } from '../commands/organization/handlers.ts';
import type { Plan } from '../commands/organization/types.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { createEventStore } from '../nats/event-store.ts';
import { createClock } from '../lib/clock.ts';
import { ApiError, CommandError } from '../lib/errors.ts';
import { applyStreams, replicasFromEnv } from '../nats/apply-streams.ts';
import { connectNats, type Nats } from '../nats/connection.ts';
import { defaultDataDir } from '../runtime/data-dir.ts';
import { natsUrlFromDataDir } from '../runtime/find-nats-url.ts';
import { checkFlags, parseArgs, UsageError } from './args.ts';
import { REPLAY_USAGE } from '../replay/usage.ts';
import { serviceUrls } from './services.ts';

const USAGE = `usage:
  jetcron serve [--roles api,projector,scheduler,dispatcher,notifier] [--processes auto|1|<groups joined by />]
  jetcron org create --name NAME [--plan free|pro]
  jetcron org plan --org ORG_ID --plan free|pro
  jetcron key create --org ORG_ID
  jetcron key revoke --key pk_…
  jetcron projections rebuild
  jetcron projections failures [--consumer NAME]
  jetcron projections retry [--consumer NAME] [--seq N [--index I]] [--wait SECONDS]
  ${REPLAY_USAGE}
  jetcron events schema
  jetcron db url
  jetcron export --table NAME [--schema S] --format csv|jsonl|parquet --out FILE
  jetcron status [--json]
  jetcron help | -h | --help
  jetcron --version

--data-dir DIR: where the embedded default keeps its servers' data and address (default
JETCRON_DATA_DIR, else .jetcron); NATS_URL and DATABASE_URL name servers of your own.`;

/** The package's version, as its package.json says. */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

// A role process of a split serve names its roles, so interleaved lines say who wrote them.
const who = process.env.JETCRON_PROCESS_GROUP && process.env.JETCRON_ROLES ? ` [${process.env.JETCRON_ROLES}]` : '';
const log = (m: string) => process.stderr.write(`${new Date().toISOString()}${who} ${m}\n`);

function need(flags: Map<string, string>, name: string): string {
  const v = flags.get(name);
  if (!v || v === 'true') throw new UsageError(`--${name} is required`);
  return v;
}

function plan(value: string): Plan {
  if (value !== 'free' && value !== 'pro') throw new UsageError('--plan must be free or pro');
  return value;
}

function natsUrl(dataDir: string): string {
  return process.env.NATS_URL || natsUrlFromDataDir(dataDir) || 'nats://127.0.0.1:4222';
}

async function withNats<T>(dataDir: string, fn: (nats: Nats) => Promise<T>) {
  const nats = await connectNats(natsUrl(dataDir), 'jetcron cli');
  try {
    await applyStreams(nats, replicasFromEnv(process.env));
    return await fn(nats);
  } finally {
    await nats.close();
  }
}

function withStore<T>(dataDir: string, fn: (deps: { store: ReturnType<typeof createEventStore>; clock: ReturnType<typeof createClock> }) => Promise<T>) {
  return withNats(dataDir, (nats) => fn({ store: createEventStore(nats), clock: createClock(1) }));
}

async function runServe(flags: Map<string, string>, dataDir: string) {
  const config = loadConfig(process.env, { roles: flags.get('roles'), processes: flags.get('processes'), dataDir, cores: availableParallelism() });
  // Loaded on demand: the admin commands should not pay for the whole service's modules.
  const split = config.processes.length > 1 && !config.processGroup;
  // The service logs JSON lines (readable on a terminal) with its roles; the admin commands plain lines.
  const { createLogger, logFunction } = await import('../lib/logger.ts');
  const serviceLog = logFunction(createLogger({ role: split ? 'parent' : [...config.roles].join(','), level: process.env.LOG_LEVEL }));
  // Signals are taken from the first moment: one that arrives while the service starts
  // stops it as soon as it has started, with its embedded servers, never half-way.
  let running: Running | undefined;
  let stopAsked: string | undefined;
  let stopping = false;
  const shutdown = (signal: string) => {
    if (!running) return void (stopAsked ??= signal);
    if (stopping) return;
    stopping = true;
    serviceLog(`${signal}: shutting down`);
    running.stop().then(() => process.exit(0), (err: Error) => {
      serviceLog(`ERROR shutdown failed: ${err.message}`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  if (config.processGroup && process.send) process.on('disconnect', () => shutdown('parent process gone'));
  running = split
    ? await (await import('../runtime/process-group.ts')).serveInProcesses(config, serviceLog)
    : await (await import('../runtime/serve.ts')).serve(config, serviceLog);
  // A role process of a split serve: ready once its roles run.
  if (config.processGroup && process.send?.({ type: 'jetcron-ready', url: running.url } satisfies ChildReady) === false) stopAsked ??= 'parent process gone';
  if (stopAsked) shutdown(stopAsked);
}

async function main(argv: string[]): Promise<void> {
  const { words, flags } = parseArgs(argv);
  const dataDir = flags.get('data-dir') ?? defaultDataDir();
  const [cmd, sub] = words;
  const print = (obj: unknown): void => void process.stdout.write(`${JSON.stringify(obj)}\n`);
  // As any CLI: the usage asked for goes to stdout and is no error; so is the version.
  if (flags.has('version') || cmd === 'version') return void process.stdout.write(`${version()}\n`);
  if (flags.has('help') || cmd === 'help' || cmd === '-h') return void process.stdout.write(`${USAGE}\n`);
  switch (`${cmd ?? ''} ${sub ?? ''}`.trim()) {
    case 'serve':
      return runServe(flags, dataDir);
    case 'org create': {
      const name = need(flags, 'name');
      const p = plan(flags.get('plan') ?? 'free');
      return withStore(dataDir, async (deps) => {
        const org = await createOrganization(deps, name, p);
        const key = await createApiKey(deps, org.state!.id);
        print({ org_id: org.state!.id, api_key: key.apiKey, webhook_secret: org.state!.webhook_secret });
      });
    }
    case 'org plan': {
      const orgId = need(flags, 'org');
      const p = plan(need(flags, 'plan'));
      return withStore(dataDir, async (deps) => {
        const org = await changePlan(deps, orgId, p);
        print({ org_id: orgId, plan: org.state!.plan });
      });
    }
    case 'key create': {
      const orgId = need(flags, 'org');
      return withStore(dataDir, async (deps) => print({ api_key: (await createApiKey(deps, orgId)).apiKey }));
    }
    case 'key revoke': {
      const key = need(flags, 'key');
      const publicId = key.split('.')[0]!;
      return withStore(dataDir, async (deps) => {
        const r = await revokeApiKey(deps, publicId);
        print({ revoked: r.key.public_id, revoked_at: r.key.revoked_at });
      });
    }
    case 'projections rebuild': {
      const { rebuildProjections } = await import('./rebuild.ts');
      return rebuildProjections({ ...serviceUrls(dataDir), log, print, progressTo: process.stderr });
    }
    case 'projections failures': {
      const { listFailures } = await import('./failures.ts');
      return withNats(dataDir, (nats) => listFailures(nats, print, { consumer: flags.get('consumer') }));
    }
    case 'projections retry': {
      const { retryFailures } = await import('./failures.ts');
      const seq = flags.has('seq') ? Number(need(flags, 'seq')) : undefined;
      if (seq !== undefined && !(Number.isInteger(seq) && seq > 0)) throw new UsageError('--seq must be a positive integer');
      const index = flags.has('index') ? Number(need(flags, 'index')) : undefined;
      if (index !== undefined && !(Number.isInteger(index) && index >= 0 && seq !== undefined)) throw new UsageError('--index must be a whole number, with --seq');
      const waitS = Number(flags.get('wait') ?? 30);
      if (!(waitS >= 0)) throw new UsageError('--wait must be a number of seconds');
      return withNats(dataDir, async (nats) => {
        const { failed } = await retryFailures(nats, print, { consumer: flags.get('consumer'), seq, index }, waitS * 1000);
        if (failed > 0) process.exitCode = 1;
      });
    }
    case 'status': {
      const { statusCommand } = await import('./status.ts');
      process.exitCode = await statusCommand({
        natsUrl: natsUrl(dataDir), databaseUrl: serviceUrls(dataDir).databaseUrl, json: flags.has('json'),
        out: (t) => void process.stdout.write(t), err: (t) => void process.stderr.write(t),
      });
      return;
    }
    case 'replay': {
      const { replayCommand, replayFromCli } = await import('./replay.ts');
      const command = replayCommand(words, flags);
      process.exitCode = await replayFromCli({ ...serviceUrls(dataDir), ...command, log, print, progressTo: process.stderr });
      return;
    }
    case 'events schema': {
      checkFlags('events schema', flags, ['data-dir'], []);
      const { asyncApiDocument } = await import('../commands/catalogue.ts');
      process.stdout.write(`${JSON.stringify(asyncApiDocument(), null, 2)}\n`);
      return;
    }
    case 'db url': {
      checkFlags('db url', flags, ['data-dir'], []);
      const url = serviceUrls(dataDir).databaseUrl;
      if (!url) throw new CommandError(`no Postgres is known: DATABASE_URL is not set and no service runs on the data directory ${dataDir} (start it: npx jetcron serve)`);
      process.stdout.write(`${url}\n`);
      return;
    }
    case 'export': {
      checkFlags('export', flags, ['table', 'schema', 'format', 'out', 'data-dir'], []);
      const { exportCommand, exportTable } = await import('./export.ts');
      const command = exportCommand(flags);
      const url = serviceUrls(dataDir).databaseUrl;
      if (!url) throw new CommandError(`no Postgres is known: DATABASE_URL is not set and no service runs on the data directory ${dataDir} (start it: npx jetcron serve)`);
      const t0 = Date.now();
      const { rows } = await exportTable(url, command);
      print({ table: `${command.schema}.${command.table}`, format: command.format, rows, out: command.out, seconds: (Date.now() - t0) / 1000 });
      return;
    }
    default:
      throw new UsageError(cmd ? `unknown command "${words.join(' ')}"` : 'no command given');
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError) {
    process.stderr.write(`jetcron: ${err.message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (err instanceof ApiError || err instanceof ConfigError || err instanceof CommandError) {
    process.stderr.write(`jetcron: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`jetcron: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
