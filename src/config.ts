import { RESTATE_AFTER_EVENTS } from './commands/monitor/held-monitors.ts';

export const ALL_ROLES = ['api', 'projector', 'scheduler', 'dispatcher', 'notifier'] as const;
export type Role = (typeof ALL_ROLES)[number];

export interface Config {
  natsUrl: string | undefined;
  databaseUrl: string | undefined;
  host: string;
  port: number;
  publicUrl: string | undefined;
  dataDir: string;
  roles: Set<Role>;
  timeScale: number;
  /** JETCRON_SCRIPT_TIMEOUT_MS: a Lua call's time limit (default 100, the contract's; tests raise it where only another limit may fire). */
  scriptTimeoutMs: number;
  allowPrivateTargets: boolean;
  /** JETCRON_STREAM_REPLICAS; unset = keep what existing streams have (1 for new ones). */
  streamReplicas: number | undefined;
  rateLimitFree: number;
  rateLimitPro: number;
  smtpUrl: string | undefined;
  /** Key for endpoint secrets (JETCRON_SECRETS_KEY); unset = one generated once and kept in NATS KV. */
  secretsKey: string | undefined;
  /** JETCRON_DISPATCH_CONCURRENCY: attempts in flight at once per process, over all its partition owners. */
  dispatchConcurrency: number;
  /** JETCRON_PARTITIONS: the task partitions the owners split the work into (fixed for a deployment). */
  partitions: number;
  /**
   * JETCRON_MONITOR_RESTATE_AFTER (default 10,000): the least age, in a partition's commit
   * events, at which a monitor owner restates a silent monitor so a takeover's read stays
   * bounded (`HeldMonitors.restates`; the bound is also at least twice the monitors held).
   */
  monitorRestateAfter: number;
  /** Whether this process, with the projector role, may take the `retry-jobs` lease and advance bulk retry and replay jobs (JETCRON_RETRY_JOBS=0: never; default yes). */
  retryJobs: boolean;
  /** The positions of a bulk job one group (one commit) takes at most (JETCRON_JOB_GROUP, 1–1000, default 1000). */
  jobGroup: number;
  /** Test-only (JETCRON_EMBEDDED_PDEATHSIG=0): false lets the embedded servers outlive a killed service. */
  embeddedDieWithParent: boolean;
  /** A consumer failing on one item, or behind without moving, for this long makes /healthz answer 503. */
  healthStuckMs: number;
  /**
   * How `serve` spreads its roles over processes (JETCRON_PROCESSES / --processes): one
   * group per process. One group = every role in this process.
   */
  processes: Role[][];
  /** Set in the processes a split `serve` starts (JETCRON_PROCESS_GROUP): the parent's id. */
  processGroup: string | undefined;
  /** JETCRON_METRICS_PORT: a listener for GET /metrics alone, in every process (unset: only the API's port serves it). */
  metricsPort: number | undefined;
  /** Live feeds (`GET /api/v1/live`) one organization may hold open on one API process (JETCRON_LIVE_FEEDS_PER_ORG). */
  liveFeedsPerOrg: number;
  /** Live feeds one API process holds open in all (JETCRON_LIVE_FEEDS_MAX). */
  liveFeedsMax: number;
}

export class ConfigError extends Error {}

function num(env: NodeJS.ProcessEnv, name: string, fallback: number, check: (n: number) => boolean): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || !check(n)) throw new ConfigError(`${name}=${raw} is not valid`);
  return n;
}

export function parseRoles(text: string | undefined): Set<Role> {
  if (!text) return new Set(ALL_ROLES);
  const roles = new Set<Role>();
  for (const part of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (!(ALL_ROLES as readonly string[]).includes(part)) {
      throw new ConfigError(`unknown role "${part}"; roles are ${ALL_ROLES.join(',')}`);
    }
    roles.add(part as Role);
  }
  if (roles.size === 0) throw new ConfigError('--roles is empty');
  return roles;
}

/**
 * The roles' processes. `auto` (the default): with 2 or 3 cores the API gets a process
 * and the other roles share one; from 4, the API, the dispatchers and the log readers
 * (projector, scheduler, notifier) each get a process, so no two of them share an event
 * loop; on 1 core, one process. `1`: one process. Or groups separated by `/`, e.g.
 * `api/dispatcher,projector,scheduler,notifier`.
 */
const SPLIT_FROM_CORES = 2;
const SPLIT_DISPATCHER_FROM_CORES = 4;

export function parseProcesses(text: string | undefined, roles: Set<Role>, cores: number): Role[][] {
  const spec = (text ?? '').trim() || 'auto';
  if (spec === '1') return [[...roles]];
  if (spec === 'auto') {
    // Measured on 2 cores (docs/benchmarks.md): the API in a process of its own ran
    // 19–27% more executions/s at the same CPU per task; the dispatcher split off too
    // cost more than it gained there, as nats-server and Postgres share the second core.
    if (cores < SPLIT_FROM_CORES) return [[...roles]];
    const alone: Role[] = cores >= SPLIT_DISPATCHER_FROM_CORES ? ['api', 'dispatcher'] : ['api'];
    const groups = alone.filter((r) => roles.has(r)).map((r) => [r]);
    const rest = [...roles].filter((r) => !alone.includes(r));
    if (rest.length) groups.push(rest);
    return groups;
  }
  const groups = spec.split('/').map((g) => [...parseRoles(g)]);
  const named = groups.flat();
  for (const r of named) {
    if (!roles.has(r)) throw new ConfigError(`JETCRON_PROCESSES names role "${r}", which this serve does not run (roles: ${[...roles].join(',')})`);
  }
  const missing = [...roles].filter((r) => !named.includes(r));
  if (missing.length) throw new ConfigError(`JETCRON_PROCESSES leaves out role(s) ${missing.join(',')}`);
  return groups;
}

/** The only place that reads the environment; everything else gets values. */
export function loadConfig(env: NodeJS.ProcessEnv, opts: { roles?: string; processes?: string; dataDir: string; cores?: number }): Config {
  const roles = parseRoles(opts.roles ?? env.JETCRON_ROLES);
  return {
    natsUrl: env.NATS_URL || undefined,
    databaseUrl: env.DATABASE_URL || undefined,
    host: env.HOST || '127.0.0.1',
    port: num(env, 'PORT', 8080, (n) => Number.isInteger(n) && n >= 0 && n < 65536),
    publicUrl: env.PUBLIC_URL ? env.PUBLIC_URL.replace(/\/+$/, '') : undefined,
    dataDir: opts.dataDir,
    roles,
    timeScale: num(env, 'JETCRON_TIME_SCALE', 1, (n) => n > 0),
    scriptTimeoutMs: num(env, 'JETCRON_SCRIPT_TIMEOUT_MS', 100, (n) => Number.isInteger(n) && n >= 10 && n <= 60_000),
    allowPrivateTargets: env.JETCRON_ALLOW_PRIVATE_TARGETS === '1' || env.JETCRON_ALLOW_PRIVATE_TARGETS === 'true',
    retryJobs: env.JETCRON_RETRY_JOBS !== '0' && env.JETCRON_RETRY_JOBS !== 'false',
    jobGroup: num(env, 'JETCRON_JOB_GROUP', 1000, (n) => Number.isInteger(n) && n >= 1 && n <= 1000),
    streamReplicas: env.JETCRON_STREAM_REPLICAS ? num(env, 'JETCRON_STREAM_REPLICAS', 1, (n) => [1, 3, 5].includes(n)) : undefined,
    rateLimitFree: num(env, 'JETCRON_RATE_LIMIT_FREE', 20, (n) => n >= 0),
    rateLimitPro: num(env, 'JETCRON_RATE_LIMIT_PRO', 200, (n) => n >= 0),
    smtpUrl: env.SMTP_URL || undefined,
    secretsKey: env.JETCRON_SECRETS_KEY || undefined,
    dispatchConcurrency: num(env, 'JETCRON_DISPATCH_CONCURRENCY', 256, (n) => Number.isInteger(n) && n >= 1),
    partitions: num(env, 'JETCRON_PARTITIONS', 8, (n) => Number.isInteger(n) && n >= 1 && n <= 256),
    monitorRestateAfter: num(env, 'JETCRON_MONITOR_RESTATE_AFTER', RESTATE_AFTER_EVENTS, (n) => Number.isInteger(n) && n >= 1),
    embeddedDieWithParent: env.JETCRON_EMBEDDED_PDEATHSIG !== '0',
    healthStuckMs: num(env, 'JETCRON_HEALTH_STUCK_MS', 30_000, (n) => Number.isInteger(n) && n >= 100),
    processes: parseProcesses(opts.processes ?? env.JETCRON_PROCESSES, roles, opts.cores ?? 1),
    processGroup: env.JETCRON_PROCESS_GROUP || undefined,
    metricsPort: env.JETCRON_METRICS_PORT ? num(env, 'JETCRON_METRICS_PORT', 0, (n) => Number.isInteger(n) && n >= 0 && n < 65536) : undefined,
    liveFeedsPerOrg: num(env, 'JETCRON_LIVE_FEEDS_PER_ORG', 20, (n) => Number.isInteger(n) && n >= 1),
    liveFeedsMax: num(env, 'JETCRON_LIVE_FEEDS_MAX', 500, (n) => Number.isInteger(n) && n >= 1),
  };
}
