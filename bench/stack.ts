/** What every benchmark module gets, and the service stack most of them run against. */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { fmt, summarize, type Table } from './stats.ts';
import {
  cpuPhase,
  createOrg,
  startNats,
  startService,
  startTarget,
  type BenchNats,
  type CpuGroup,
  type CpuReport,
  type Service,
  type SharedPostgres,
  type Target,
} from './harness.ts';
import { ApiClient } from './load.ts';
import { STREAMS } from '../streams/definitions.ts';
import { connectNats } from '../src/nats/connection.ts';

export interface Metric {
  label: string;
  value: string;
  /** The goal, as text ("≥ 3,000/s"), when there is one. */
  goal?: string;
  ok?: boolean;
}

export interface BenchResult {
  name: string;
  title: string;
  metrics: Metric[];
  /** Rows for the run's summary table (usually the headline metrics). */
  headline: Metric[];
  tables: { title: string; table: Table }[];
  /** CPU per process over the measured phase; `units` gives a per-unit cost column (e.g. per task). */
  cpu?: { phase: string; report: CpuReport; units?: { count: number; what: string } };
  notes: string[];
}

export interface BenchContext {
  /** The shared Postgres, started on first use. */
  postgres(): Promise<SharedPostgres>;
  /** requests/s of the raw undici loop measured in this run (set by `reference`). */
  rawRate: number | undefined;
  /** Directory for service CPU profiles when profiling was asked for. */
  cpuProfDir: string | undefined;
  log(m: string): void;
}

export interface Benchmark {
  name: string;
  title: string;
  run(ctx: BenchContext): Promise<BenchResult>;
}

export interface Stack {
  nats: BenchNats;
  databaseUrl: string;
  target: Target;
  service: Service;
  api: ApiClient;
  orgId: string;
  /** A small pool on the service's database, for polling the read models. */
  db: pg.Pool;
  cpuGroups: CpuGroup[];
  startCpuPhase(): () => CpuReport;
  /** Another API client (same key) with its own connection pool, closed with the stack. */
  client(connections: number): ApiClient;
}

/** nats-server + a fresh database + target + `jetcron serve` + an org; all torn down after `fn`. */
export async function withStack<T>(
  ctx: BenchContext,
  name: string,
  fn: (s: Stack) => Promise<T>,
  opts: { env?: Record<string, string>; plan?: 'free' | 'pro'; node?: string; nats?: Parameters<typeof startNats>[0] } = {},
): Promise<T> {
  const postgres = await ctx.postgres();
  const stops: (() => Promise<void>)[] = [];
  try {
    ctx.log(`${name}: starting nats-server, database, target and jetcron serve`);
    const nats = await startNats(opts.nats);
    stops.push(nats.stop);
    const database = await postgres.createDatabase(name);
    stops.push(database.drop);
    const target = await startTarget();
    stops.push(target.stop);
    const service = await startService({ name, natsUrl: nats.url, databaseUrl: database.url, cpuProfDir: ctx.cpuProfDir, env: opts.env, node: opts.node });
    stops.push(service.stop);
    const { orgId, apiKey } = await createOrg(nats.url, opts.plan);
    const api = new ApiClient(service.url, apiKey, 64);
    stops.push(() => api.close());
    const check = await api.get('/api/v1/tasks');
    if (check.status !== 200) throw new Error(`GET /api/v1/tasks with the new key answered ${check.status}`);
    const db = new pg.Pool({ connectionString: database.url, max: 2 });
    db.on('error', () => {});
    stops.push(() => db.end());
    const cpuGroups: CpuGroup[] = [
      { name: 'jetcron service (node)', pid: () => service.pid, withDescendants: true, byChild: true },
      { name: 'nats-server', pid: () => nats.pid(), withDescendants: false },
      { name: 'postgres (all backends)', pid: () => postgres.postmasterPid(), withDescendants: true },
      { name: 'target server (node)', pid: () => target.pid, withDescendants: true },
      { name: 'bench load generator (node)', pid: () => process.pid, withDescendants: false },
    ];
    ctx.log(`${name}: ready (service ${service.url}, target ${target.url})`);
    const client = (connections: number) => {
      const c = new ApiClient(service.url, apiKey, connections);
      stops.push(() => c.close());
      return c;
    };
    let phaseMarked = false;
    return await fn({ nats, databaseUrl: database.url, target, service, api, orgId, db, cpuGroups, startCpuPhase: () => {
      const end = cpuPhase(cpuGroups);
      if (!ctx.cpuProfDir || phaseMarked) return end;
      phaseMarked = true;
      // The first measured phase's span of the monotonic clock (V8's profile timestamps use it too), for
      // `bench/profile-phase.ts`: the profiles cover the whole run, startup included. A benchmark may write its own after.
      const fromUs = Number(process.hrtime.bigint() / 1000n);
      return () => {
        const report = end();
        const dir = path.join(ctx.cpuProfDir!, name);
        mkdirSync(dir, { recursive: true });
        writeFileSync(path.join(dir, 'phase.json'), JSON.stringify({ fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }));
        return report;
      };
    }, client });
  } finally {
    // Service first (it drains), then what it used.
    for (const stop of stops.reverse()) await stop().catch((e: Error) => ctx.log(`${name}: teardown: ${e.message}`));
  }
}

/** The last sequence of EVENTS: messages stored between two readings, for messages per execution. */
export async function eventsLastSeq(s: Stack): Promise<number> {
  const nats = await connectNats(s.nats.url, 'bench-events-seq');
  try {
    return (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
  } finally {
    await nats.close();
  }
}

/** `SELECT count(*) … WHERE status = $1` on executions. */
export async function countExecutions(db: pg.Pool, status = 'success'): Promise<number> {
  const r = await db.query<{ n: string }>('SELECT count(*) AS n FROM executions WHERE status = $1', [status]);
  return Number(r.rows[0]?.n ?? 0);
}

export async function executionStatuses(db: pg.Pool): Promise<string> {
  const r = await db.query<{ status: string; n: string }>('SELECT status, count(*) AS n FROM executions GROUP BY status ORDER BY status');
  return r.rows.map((x) => `${x.status}=${x.n}`).join(', ') || 'none';
}

/** Service log lines that look like trouble, as notes (at most a few). */
export function troubleNotes(service: Service): string[] {
  const lines = service.troubleLines();
  if (!lines.length) return [];
  return [`service log has ${lines.length} error/retry line(s) (${service.logFile}); first: ${lines.slice(0, 3).map((l) => l.slice(0, 240)).join(' | ')}`];
}

export interface ExecutionTimes {
  /** Task name, which the benchmarks make unique per task. */
  name: string;
  /** Wall-clock ms: the API's decision (TaskCreated), the planned run, the dispatcher's start, the attempt's end. */
  createdAt: number;
  scheduledFor: number;
  startedAt: number | null;
  finishedAt: number | null;
}

/** Service-side timestamps of the executions whose task name starts with `prefix`. */
export async function executionTimes(db: pg.Pool, prefix: string): Promise<Map<string, ExecutionTimes>> {
  const r = await db.query<{ name: string; c: string; s: string; st: string | null; f: string | null }>(
    `SELECT source_name AS name,
            extract(epoch FROM created_at) * 1000 AS c, extract(epoch FROM scheduled_for) * 1000 AS s,
            extract(epoch FROM started_at) * 1000 AS st, extract(epoch FROM finished_at) * 1000 AS f
       FROM executions WHERE source_name LIKE $1`,
    [`${prefix}%`],
  );
  const num = (v: string | null) => (v == null ? null : Number(v));
  return new Map(r.rows.map((x) => [x.name, { name: x.name, createdAt: Number(x.c), scheduledFor: Number(x.s), startedAt: num(x.st), finishedAt: num(x.f) }]));
}

/** Offset to add to process.hrtime ms to get wall-clock ms (same machine, same clocks). */
export function hrToWallOffset(): number {
  const a = performance.timeOrigin + performance.now();
  const hr = Number(process.hrtime.bigint()) / 1e6;
  const b = performance.timeOrigin + performance.now();
  return (a + b) / 2 - hr;
}

export function stageTable(stages: { label: string; values: number[] }[]): Table {
  return {
    headers: ['stage', 'n', 'p50', 'p90', 'p99', 'max'],
    rows: stages.map(({ label, values }) => {
      const x = summarize(values);
      return [label, fmt.int(x.n), fmt.ms(x.p50), fmt.ms(x.p90), fmt.ms(x.p99), fmt.ms(x.max)];
    }),
  };
}

/**
 * Waits until `n` executions of tasks named `prefix…` are finished in Postgres (the
 * projection catches up after the target has seen the requests); bounded by `timeoutMs`.
 * Returns how long that took, or undefined on timeout.
 */
export async function waitForFinished(db: pg.Pool, prefix: string, n: number, timeoutMs: number): Promise<number | undefined> {
  const t0 = performance.now();
  for (;;) {
    const r = await db.query<{ n: string }>('SELECT count(*) AS n FROM executions WHERE source_name LIKE $1 AND finished_at IS NOT NULL', [`${prefix}%`]);
    if (Number(r.rows[0]?.n ?? 0) >= n) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) return undefined;
    await new Promise((res) => setTimeout(res, 50));
  }
}
