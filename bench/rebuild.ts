/**
 * `jetcron projections rebuild` and `jetcron replay` of the example projection over
 * one EVENTS store of ~250,000 events, both through the real CLI, side by side.
 *
 * The store is written straight into EVENTS (no service): synthetic events with the
 * shapes the command handlers and the dispatcher write (src/commands/**\/types.ts):
 * mostly a task create and its attempt's result, some retries, tasks still waiting,
 * updates and deletes, schedules and their ticks, monitor pings, inbound events
 * forwarded to a URL.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { SUBJECTS } from '../streams/subjects.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import type { Task } from '../src/commands/task/types.ts';
import type { Schedule } from '../src/commands/schedule/types.ts';
import type { Monitor } from '../src/commands/monitor/types.ts';
import type { Endpoint } from '../src/commands/endpoint/types.ts';
import type { AttemptResult, ExecutionSource } from '../src/commands/execution/types.ts';
import { applyStreams } from '../src/nats/apply-streams.ts';
import { connectNats } from '../src/nats/connection.ts';
import { newId } from '../src/lib/ids.ts';
import { commitMessage } from '../src/commands/commit.ts';
import { cpuPhase, ROOT, startNats, tempDir, withClient, type CpuReport } from './harness.ts';
import type { Benchmark, Metric } from './stack.ts';
import { fmt } from './stats.ts';

const TASKS = 100_000;
/** Of the tasks that ran, one in ten failed once before succeeding. */
const RETRY_EVERY = 10;
/** One in twenty tasks is still waiting (a delay): no attempt yet. */
const WAITING_EVERY = 20;
const ORGS = 20;
const SCHEDULES = 100;
const TICKS = 10_000;
const MONITORS = 200;
const PINGS = 10_000;
const ENDPOINTS = 20;
const INBOUND = 5_000;
const IN_FLIGHT = 2_000;
export const EXAMPLE = 'examples/projections/daily-outcomes.ts';
/** Counts every event it gets: the replay's own speed (issue 37: ≥ 50,000 events/s, and `--types` of a rare type ≥ 5× faster). */
const COUNTER = 'bench/fixtures/count-events.ts';
/**
 * Rare types of the store's ~250,000 events: 100 `ScheduleCreated` (their subjects also
 * hold the 10,000 ticks, read and passed over undecoded) and 20 `EndpointCreated`
 * (alone on theirs: the server sends only them).
 */
const RARE_TYPES = ['ScheduleCreated', 'EndpointCreated'] as const;

/**
 * How the store holds its events: `events`, one message each (the shape of logs written
 * before commits, which must stay readable); `commits`, the shape the service writes
 * now: a turn's creates of one organization in one commit (`create-commits.ts`, up to
 * 256), a partition owner's results in one commit (`partition-log.ts`, up to 1 MiB),
 * a group of inbound requests to one endpoint in one commit (the router); the
 * aggregates that append alone (organizations, schedules and their ticks, monitors and
 * their pings, a task's later changes) one message each, as there.
 */
export type StoreShape = 'events' | 'commits';

/** The service's limits per commit: creates by count, an owner's results by bytes. */
const CREATES_PER_COMMIT = 256;
const RESULT_COMMIT_BYTES = 1024 * 1024;
/** Partition owners per process: results are spread over their subjects. */
const PARTITIONS = 8;

/** Where the history goes, event by event; the store's shape decides what a message holds. */
interface HistoryLog {
  /** An event its aggregate appends alone. */
  append(subject: string, event: JetcronEvent): Promise<void>;
  /** An event the service writes inside a commit: the creates of one organization, the inbound requests of one endpoint, the results of one partition. */
  commit(kind: 'creates' | 'inbound' | 'results', key: string, subject: string, event: JetcronEvent): Promise<void>;
  /** An event of a later turn than the commits being gathered (a change to a task they create): appended alone, after them. */
  later(subject: string, event: JetcronEvent): Promise<void>;
  /** Writes the commits gathered since the last flush: creates and inbound first, then the later events, then the results (of what is stored before them). */
  flush(): Promise<void>;
}

type Publish = (subject: string, message: unknown, id: string) => Promise<void>;

function historyLog(shape: StoreShape, publish: Publish): HistoryLog & { events: () => number } {
  let events = 0;
  const append = (subject: string, event: JetcronEvent) => {
    events++;
    return publish(subject, event, event.id);
  };
  if (shape === 'events') return { append, commit: (_kind, _key, subject, event) => append(subject, event), later: append, flush: async () => {}, events: () => events };
  const open = new Map<string, { kind: string; subject: string; events: JetcronEvent[]; bytes: number }>();
  let afterwards: [string, JetcronEvent][] = [];
  let commits = 0;
  const write = async (g: { kind: string; subject: string; events: JetcronEvent[] }) => {
    const id = g.kind === 'results' ? `commit.${g.subject.split('.').pop()}.1.${commits++}` : newId('cmd');
    const subject = g.kind === 'creates' ? SUBJECTS.batch(g.subject, id) : g.subject;
    const message = { ...commitMessage(id, g.events, new Date()), ...(g.kind === 'results' ? { from: 1 } : {}) };
    events += g.events.length;
    await publish(subject, message, id);
  };
  return {
    append,
    async commit(kind, key, subject, event) {
      const name = `${kind}:${key}`;
      const bytes = JSON.stringify(event).length;
      let g = open.get(name);
      if (g && (kind === 'results' ? g.bytes + bytes > RESULT_COMMIT_BYTES : g.events.length >= CREATES_PER_COMMIT)) {
        // Full: it waits for the flush under another name, and the next event opens a new one.
        open.delete(name);
        open.set(`${name}:${commits++}`, g);
        g = undefined;
      }
      // A create commit's subject names its organization; an owner's, its partition; a group's, its first request.
      if (!g) open.set(name, (g = { kind, subject: kind === 'creates' ? key : kind === 'results' ? SUBJECTS.partition(Number(key)) : subject, events: [], bytes: 0 }));
      g.events.push(event);
      g.bytes += bytes;
    },
    async later(subject, event) {
      afterwards.push([subject, event]);
    },
    async flush() {
      const groups = [...open.values()];
      const singles = afterwards;
      open.clear();
      afterwards = [];
      for (const g of groups) if (g.kind !== 'results') await write(g);
      for (const [subject, event] of singles) await append(subject, event);
      for (const g of groups) if (g.kind === 'results') await write(g);
    },
    events: () => events,
  };
}

/** Writes the store; returns the number of events (and of messages). */
export async function buildEventStore(natsUrl: string, shape: StoreShape = 'events'): Promise<{ events: number; messages: number }> {
  const nats = await connectNats(natsUrl, 'bench rebuild store');
  try {
    await applyStreams(nats, undefined);
    const inFlight = new Set<Promise<unknown>>();
    let messages = 0;
    let failure: Error | undefined;
    const publish: Publish = async (subject, message, id) => {
      if (failure) throw failure;
      const p: Promise<unknown> = nats.publish(subject, Buffer.from(JSON.stringify(message)), { msgId: id, batch: true }).then(
        () => inFlight.delete(p),
        (err: Error) => (failure = err),
      );
      inFlight.add(p);
      messages++;
      if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
    };
    const log = historyLog(shape, publish);
    await writeHistory(log);
    await log.flush();
    await Promise.all(inFlight);
    if (failure) throw failure;
    return { events: log.events(), messages };
  } finally {
    await nats.close();
  }
}

/** The partition owner a result goes to (any spread will do: the projector reads them all). */
const partitionOf = (executionId: string) => {
  let h = 0;
  for (let i = 0; i < executionId.length; i++) h = (h * 31 + executionId.charCodeAt(i)) | 0;
  return String(Math.abs(h) % PARTITIONS);
};

/**
 * One week of history, the clock moving a little with every event. Exported so the
 * events can be had in memory (a projector's prepare cost measured in one process).
 */
export async function writeHistory(log: HistoryLog): Promise<void> {
  let clock = Date.now() - 7 * 86_400_000;
  const total = TASKS * 2 + TICKS * 2 + PINGS + INBOUND * 2;
  const step = (7 * 86_400_000) / total;
  const now = () => new Date((clock += step)).toISOString();
  const event = <E extends JetcronEvent>(type: E['type'], org: string, data: E['data']): JetcronEvent =>
    ({ type, id: newId('evt', clock), at: now(), org_id: org, data }) as JetcronEvent;

  const orgs: string[] = [];
  for (let i = 0; i < ORGS; i++) {
    const id = newId('org', clock);
    orgs.push(id);
    const at = now();
    await log.append(SUBJECTS.org(id), event('OrganizationCreated', id, {
      organization: { id, name: `org ${i}`, plan: i % 4 ? 'free' : 'pro', webhook_secret: `whsec_${id}`, notification_email: null, notification_webhook_url: null, notify_on_failure: true, notify_on_recovery: true, created_at: at, updated_at: at },
    }));
    const publicId = `jk_${id.slice(4, 16)}`;
    await log.append(SUBJECTS.apiKey(publicId), event('ApiKeyCreated', id, { key: { public_id: publicId, org_id: id, secret_hash: 'x'.repeat(64), created_at: at, revoked_at: null } }));
  }

  // `count` aggregates of one kind, spread over the organizations, each with its creation event.
  const many = async <T extends { org_id: string }>(count: number, make: (i: number, at: string, org: string) => T, created: (t: T) => [string, JetcronEvent]) => {
    const made: T[] = [];
    for (let i = 0; i < count; i++) {
      const t = make(i, now(), orgs[i % ORGS]!);
      made.push(t);
      await log.append(...created(t));
    }
    return made;
  };
  const schedules = await many<Schedule>(SCHEDULES, (i, at, org) => ({
    id: newId('sch', clock), org_id: org, name: `report ${i}`, url: `https://hooks.example.com/report/${i}`, cron: '*/5 * * * *', timezone: 'UTC',
    method: 'GET', headers: { Authorization: 'Bearer ***' }, body: null, timeout_ms: 30_000, retry_attempts: 3, enabled: true, notify_on_failure: null,
    notify_on_recovery: null, expected_status_codes: null, script: null, sync_key: null, created_at: at, updated_at: at, next_run_at: at,
  }), (s) => [`evt.${s.org_id}.schedule.${s.id}`, event('ScheduleCreated', s.org_id, { schedule: s })]);
  const monitors = await many<Monitor>(MONITORS, (i, at, org) => ({
    id: newId('mon', clock), org_id: org, token: newId('png', clock).slice(4), name: `backup ${i}`, schedule_type: 'interval', interval_seconds: 3600,
    cron_expression: null, timezone: 'UTC', grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null,
    on_recovery_url: null, sync_key: null, max_duration_seconds: null, min_duration_seconds: null, slug: null, status: 'new', down_reason: null, paused: false,
    last_ping_at: null, next_expected_at: null, late_at: null, runs: [], deadline_at: null, created_at: at, updated_at: at,
  }), (m) => [`evt.${m.org_id}.monitor.${m.id}`, event('MonitorCreated', m.org_id, { monitor: m })]);
  const endpoints = await many<Endpoint>(ENDPOINTS, (i, at, org) => ({
    id: newId('ep', clock), org_id: org, slug: `in-${i}-${newId('ep', clock).slice(-8)}`, name: `stripe ${i}`, forward_urls: [`https://app.example.com/hooks/${i}`],
    retry_attempts: 5, use_lane: false, enabled: true, forward_method: null, forward_headers: null, forward_body: null, on_failure_url: null, on_recovery_url: null,
    notify_on_failure: null, notify_on_recovery: null, script: null, paused: false, secret_names: [], sealed_secrets: null, created_at: at, updated_at: at,
  }), (e) => [SUBJECTS.endpoint(e.org_id, e.id), event('EndpointCreated', e.org_id, { endpoint: e })]);

  const finished = (org: string, source: ExecutionSource, executionId: string, url: string, attempt: number, ok: boolean, scheduledFor: string, retryAt: string | null) => {
    const started = new Date(clock - 40);
    const data: AttemptResult = {
      execution_id: executionId, source, attempt, status: ok ? 'success' : 'failed', status_code: ok ? 200 : 503, error_message: ok ? null : 'HTTP 503',
      scheduled_for: scheduledFor, started_at: started.toISOString(), finished_at: new Date(clock).toISOString(), duration_ms: 40,
      request: { method: 'POST', url, headers: { 'Content-Type': 'application/json', 'User-Agent': 'jetcron/0.1', 'X-Jetcron-Signature': '***', 'X-Jetcron-Execution-Id': executionId }, body: `{"order":"${executionId.slice(-8)}","amount":1200}` },
      response_body: ok ? '{"ok":true,"received":true}' : '<html><body>Service Unavailable</body></html>', response_truncated: false,
      response_headers: { 'content-type': ok ? 'application/json' : 'text/html', date: started.toUTCString(), server: 'nginx', 'content-length': ok ? '27' : '47' },
      script_logs: [], next_attempt_at: retryAt, final: retryAt === null, callback_url: null, push_callback_url: null, lane: null,
    };
    return event('AttemptFinished', org, data);
  };

  // Tasks arrive in chunks; each chunk's results follow the next chunk's creates.
  const CHUNK = 500;
  let previous: Task[] = [];
  const finishChunk = async (tasks: Task[]) => {
    for (const [i, t] of tasks.entries()) {
      const exe = t.pending_execution!;
      const source = { type: 'task' as const, id: t.id, name: t.name };
      const subject = SUBJECTS.execution(t.org_id, exe.id);
      if (i % RETRY_EVERY === 3) {
        await log.commit('results', partitionOf(exe.id), subject, finished(t.org_id, source, exe.id, t.url, 1, false, exe.scheduled_for, new Date(clock + 1000).toISOString()));
      }
      await log.commit('results', partitionOf(exe.id), subject, finished(t.org_id, source, exe.id, t.url, i % RETRY_EVERY === 3 ? 2 : 1, true, exe.scheduled_for, null));
    }
  };
  let made = 0;
  let tick = 0;
  let ping = 0;
  let inbound = 0;
  while (made < TASKS) {
    const chunk: Task[] = [];
    for (let i = 0; i < CHUNK && made < TASKS; i++, made++) {
      const at = now();
      const org = orgs[made % ORGS]!;
      const waiting = made % WAITING_EVERY === 7;
      const scheduledFor = waiting ? new Date(clock + 30 * 86_400_000).toISOString() : at;
      const t: Task = {
        id: newId('tsk', clock), org_id: org, name: `send invoice ${made}`, url: `https://api.example.com/invoices/${made % 1000}/send`, method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ***' }, body: { invoice: made, customer: `cus_${made % 5000}`, amount: 1200 + (made % 300) },
        delay: waiting ? '30d' : null, run_at: null, timeout_ms: 30_000, retry_attempts: 5, callback_url: null, lane: made % 50 === 0 ? `customer-${made % 400}` : null, flow_control: null,
        enabled: true, notify_on_failure: null, notify_on_recovery: null, expected_status_codes: null, expected_body_pattern: null, on_failure_url: null,
        on_recovery_url: null, script: null, debounce: null, debounce_key: null, created_at: at, updated_at: at,
        pending_execution: { id: newId('exe', clock), scheduled_for: scheduledFor, callback_url: null },
      };
      await log.commit('creates', org, SUBJECTS.task(org, t.id), event('TaskCreated', org, { task: t, execution: t.pending_execution! }));
      if (waiting && made % 200 === 7) {
        const updated = { ...t, name: `${t.name} (edited)`, updated_at: now() };
        await log.later(SUBJECTS.task(org, t.id), event('TaskUpdated', org, { task: updated, changed: ['name'] }));
      } else if (waiting && made % 200 === 27) {
        await log.later(SUBJECTS.task(org, t.id), event('TaskDeleted', org, { task: t }));
      }
      if (!waiting) chunk.push(t);
    }
    await finishChunk(previous);
    previous = chunk;
    // Interleaved: schedule ticks and their results, pings, inbound events and their deliveries.
    for (const share = (made / TASKS); tick < TICKS * share; tick++) {
      const s = schedules[tick % SCHEDULES]!;
      const exe = { id: newId('exe', clock), scheduled_for: now(), callback_url: null };
      const subject = `evt.${s.org_id}.schedule.${s.id}`;
      const next = new Date(clock + 300_000).toISOString();
      await log.append(subject, event('ScheduleTicked', s.org_id, { schedule: { ...s, next_run_at: next }, execution: exe, next_run_at: next }));
      await log.commit('results', partitionOf(exe.id), SUBJECTS.execution(s.org_id, exe.id), finished(s.org_id, { type: 'schedule', id: s.id, name: s.name }, exe.id, s.url, 1, tick % 17 !== 0, exe.scheduled_for, null));
    }
    for (const share = (made / TASKS); ping < PINGS * share; ping++) {
      const m = monitors[ping % MONITORS]!;
      const at = now();
      const monitor: Monitor = { ...m, status: 'up', last_ping_at: at, next_expected_at: new Date(clock + 3_600_000).toISOString(), updated_at: at };
      const record = { id: newId('png', clock), received_at: at, kind: 'success' as const, exit_status: null, rid: null, duration_ms: null, method: 'GET', source_ip: '10.1.2.3', user_agent: 'curl/8.5.0', body: '' };
      await log.append(`evt.${m.org_id}.monitor.${m.id}`, event('MonitorPinged', m.org_id, { monitor, ping: record, previous_status: ping < MONITORS ? 'new' : 'up' }));
    }
    for (const share = (made / TASKS); inbound < INBOUND * share; inbound++) {
      const e = endpoints[inbound % ENDPOINTS]!;
      const at = now();
      const id = newId('evt', clock);
      const exe = { execution_id: newId('exe', clock), url: e.forward_urls[0]!, method: null, headers: null, body: null, scheduled_for: at };
      await log.commit('inbound', e.id, SUBJECTS.inboundEvent(e.org_id, id), event('InboundEventReceived', e.org_id, {
        event: { id, endpoint_id: e.id, method: 'POST', path: '/', query: '', source_ip: '54.1.2.3', received_at: at, body_size: 840, inbound_seq: inbound + 1, outcome: 'forwarding' },
        endpoint: { id: e.id, name: e.name, use_lane: false, retry_attempts: 5 },
        executions: [exe],
      }));
      await log.commit('results', partitionOf(exe.execution_id), SUBJECTS.execution(e.org_id, exe.execution_id), finished(e.org_id, { type: 'endpoint', id: e.id, name: e.name }, exe.execution_id, exe.url, 1, true, at, null));
    }
    await log.flush();
  }
  await finishChunk(previous);
}

export interface CliRun {
  printed: Record<string, unknown>;
  wallSeconds: number;
  cpu: CpuReport;
}

/**
 * One `node bin/jetcron.mjs …` run; its last stdout line is its JSON answer. CPU is
 * taken when that line appears, while the CLI and its Postgres backend still exist.
 */
export async function runCli(args: string[], env: Record<string, string>, groups: (pid: () => number | undefined) => Parameters<typeof cpuPhase>[0], profDir?: string, root = ROOT): Promise<CliRun> {
  const { dir, remove } = tempDir('cli');
  const prof = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const child = spawn(process.execPath, [...prof, path.join(root, 'bin', 'jetcron.mjs'), ...args, '--data-dir', dir], {
    cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const end = cpuPhase(groups(() => child.pid));
  const t0 = performance.now();
  try {
    let stdout = '';
    let stderr = '';
    let cpu: CpuReport | undefined;
    let wallSeconds = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (!cpu && stdout.includes('}\n')) {
        wallSeconds = (performance.now() - t0) / 1000;
        cpu = end();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    if (code !== 0 || !cpu) throw new Error(`jetcron ${args.join(' ')} exited with ${code}: ${stderr.slice(-2000)}`);
    return { printed: JSON.parse(stdout.trim().split('\n').pop() ?? '{}'), wallSeconds, cpu };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await remove();
  }
}

const cpuSummary = (r: CpuReport) => `${r.rows.filter((x) => !x.detail).map((x) => x.cpuSeconds.toFixed(1)).join(' / ')} (machine ${fmt.pct(r.machineBusyPct)} busy)`;

/** The store's shapes measured, the log the service writes now first; `JETCRON_BENCH_REBUILD_SHAPES=commits` for one. */
const SHAPES = (process.env.JETCRON_BENCH_REBUILD_SHAPES ?? 'commits,events').split(',').map((x) => x.trim()) as StoreShape[];

interface ShapeRun {
  shape: StoreShape;
  store: { events: number; messages: number; seconds: number };
  rebuilt: CliRun;
  replayed: CliRun;
  counted: CliRun;
  rare: CliRun[];
  rows: Record<string, string>;
  rebuildRate: number;
  replayRate: number;
}

/** One store of `shape` in a fresh nats-server, then the rebuild and the replay into a fresh database. */
async function runShape(ctx: Parameters<Benchmark['run']>[0], postgres: Awaited<ReturnType<Parameters<Benchmark['run']>[0]['postgres']>>, shape: StoreShape): Promise<ShapeRun> {
  const nats = await startNats();
  const database = await postgres.createDatabase(`rebuild_${shape}`);
  try {
    ctx.log(`rebuild: writing the event store (${shape})`);
    const t0 = performance.now();
    const store = await buildEventStore(nats.url, shape);
    const storeSeconds = (performance.now() - t0) / 1000;
    ctx.log(`rebuild: ${store.events} events in ${store.messages} messages in ${storeSeconds.toFixed(1)} s; running jetcron projections rebuild`);
    const env = { NATS_URL: nats.url, DATABASE_URL: database.url };
    const groups = (pid: () => number | undefined) => [
      { name: 'jetcron CLI (node)', pid, withDescendants: true },
      { name: 'postgres (all backends)', pid: () => postgres.postmasterPid(), withDescendants: true },
      { name: 'nats-server', pid: () => nats.pid(), withDescendants: false },
    ];
    const prof = (what: string) => (ctx.cpuProfDir ? path.join(ctx.cpuProfDir, 'rebuild', `${shape}-${what}`) : undefined);
    const rebuilt = await runCli(['projections', 'rebuild'], env, groups, prof('rebuild'));
    ctx.log('rebuild: running jetcron replay --from-start of the example projection');
    const replayed = await runCli(['replay', '--projection', EXAMPLE, '--from-start'], env, groups, prof('replay'));
    ctx.log(`rebuild: replaying a projection that counts every event, then with --types ${RARE_TYPES.join(', then ')}`);
    const counted = await runCli(['replay', '--projection', COUNTER, '--from-start'], env, groups, prof('replay-count'));
    const rare: CliRun[] = [];
    for (const type of RARE_TYPES) rare.push(await runCli(['replay', '--projection', COUNTER, '--from-start', '--types', type], env, groups, prof(`replay-${type}`)));
    const rows = await withClient(database.url, async (c: pg.Client) => {
      const r = await c.query<Record<string, string>>(`SELECT (SELECT count(*) FROM tasks) AS tasks, (SELECT count(*) FROM executions) AS executions,
        (SELECT count(*) FROM execution_attempts) AS attempts, (SELECT count(*) FROM pings) AS pings, (SELECT count(*) FROM inbound_events) AS inbound,
        (SELECT coalesce(sum(executions), 0) FROM analytics.daily_outcomes) AS outcomes`);
      return r.rows[0]!;
    });
    // The rebuild prints the log's last sequence (its messages); the rate is of the events they hold.
    const rebuildRate = store.events / Number(rebuilt.printed.seconds);
    const replayRate = Number(replayed.printed.events) / Number(replayed.printed.seconds);
    return { shape, store: { ...store, seconds: storeSeconds }, rebuilt, replayed, counted, rare, rows, rebuildRate, replayRate };
  } finally {
    await database.drop();
    await nats.stop();
  }
}

/** The stages a rebuild prints (none before 2026-11-26's range reader). */
export const stagesOf = (printed: Record<string, unknown>): string => {
  const st = printed.stages as Record<string, number> | undefined;
  return st ? [st.tables, st.projecting, st.indexes].map((x) => fmt.s(Number(x))).join(' / ') : '–';
};

const countRate = (r: ShapeRun) => Number(r.counted.printed.events) / Number(r.counted.printed.seconds);
const rareSpeedup = (r: ShapeRun, i: number) => Number(r.counted.printed.seconds) / Number(r.rare[i]!.printed.seconds);

const SHAPE_NAMES: Record<StoreShape, string> = { commits: 'commits (as the service writes now)', events: 'one event per message (logs before commits)' };

export const rebuild: Benchmark = {
  name: 'rebuild',
  title: '`jetcron projections rebuild` vs `jetcron replay` of examples/projections/daily-outcomes.ts over ~250,000 events, in commits and one per message',
  async run(ctx) {
    const postgres = await ctx.postgres();
    const runs: ShapeRun[] = [];
    for (const shape of SHAPES) runs.push(await runShape(ctx, postgres, shape));
    // Issue 21, aim 8: about the log the service writes (the first shape); the old shape's line stays beside it.
    const goal = 50_000;
    const metrics: Metric[] = runs.flatMap((r) => {
      const name = SHAPE_NAMES[r.shape];
      return [
        { label: `${name}: events in messages`, value: `${fmt.int(r.store.events)} in ${fmt.int(r.store.messages)} (${(r.store.events / r.store.messages).toFixed(1)} a message; written in ${fmt.s(r.store.seconds)})` },
        { label: `${name}: projections rebuild, seconds it printed (process wall)`, value: `${fmt.s(Number(r.rebuilt.printed.seconds))} (${fmt.s(r.rebuilt.wallSeconds)})` },
        { label: `${name}: of which fresh tables / projecting / indexes`, value: stagesOf(r.rebuilt.printed) },
        { label: `${name}: projections rebuild`, value: fmt.rate(r.rebuildRate), goal: `≥ ${fmt.rate(goal)}`, ok: r.rebuildRate >= goal },
        { label: `${name}: replay of the example, seconds it printed (process wall)`, value: `${fmt.s(Number(r.replayed.printed.seconds))} (${fmt.s(r.replayed.wallSeconds)})` },
        { label: `${name}: replay of the example`, value: fmt.rate(r.replayRate) },
        { label: `${name}: replay counting every event`, value: fmt.rate(countRate(r)), goal: `≥ ${fmt.rate(goal)}`, ok: countRate(r) >= goal },
        ...RARE_TYPES.map((type, i) => ({
          label: `${name}: replay of --types ${type} (${fmt.int(Number(r.rare[i]!.printed.events))} events), seconds it printed; × faster than every event`,
          value: `${fmt.s(Number(r.rare[i]!.printed.seconds))}; ${rareSpeedup(r, i).toFixed(1)}×`, goal: '≥ 5×', ok: rareSpeedup(r, i) >= 5,
        })),
        { label: `${name}: rebuild CPU s: CLI / postgres / nats-server / other processes`, value: cpuSummary(r.rebuilt.cpu) },
        { label: `${name}: replay CPU s: CLI / postgres / nats-server / other processes`, value: cpuSummary(r.replayed.cpu) },
        { label: `${name}: rows: tasks / executions / attempts / pings / inbound events`, value: [r.rows.tasks, r.rows.executions, r.rows.attempts, r.rows.pings, r.rows.inbound].map((n) => fmt.int(Number(n))).join(' / ') },
        { label: `${name}: daily_outcomes: executions counted`, value: fmt.int(Number(r.rows.outcomes)) },
      ];
    });
    const first = runs[0]!;
    return {
      name: this.name,
      title: this.title,
      metrics,
      headline: runs.flatMap((r) => [
        { label: `projections rebuild, ${r.shape}`, value: fmt.rate(r.rebuildRate), goal: `≥ ${fmt.rate(goal)}`, ok: r.rebuildRate >= goal },
        { label: `replay of the example projection, ${r.shape}`, value: fmt.rate(r.replayRate) },
        { label: `replay counting every event, ${r.shape}`, value: fmt.rate(countRate(r)), goal: `≥ ${fmt.rate(goal)}`, ok: countRate(r) >= goal },
        ...RARE_TYPES.map((type, i) => ({ label: `replay --types ${type} × faster, ${r.shape}`, value: `${rareSpeedup(r, i).toFixed(1)}×`, goal: '≥ 5×', ok: rareSpeedup(r, i) >= 5 })),
      ]),
      tables: [],
      cpu: { phase: `projections rebuild, ${first.shape}`, report: first.rebuilt.cpu, units: { count: first.store.events, what: 'event' } },
      notes: [
        'The store: tasks created with their attempt result (one in ten failing once first, one in twenty still waiting, some updated or deleted), schedule ticks and results, monitor pings, inbound events forwarded once; written straight into EVENTS.',
        'Shapes: "commits" as the service writes now (a chunk\'s creates of one organization in one commit, results in partition owners\' commits, inbound requests of one endpoint in one commit; pings, ticks and a task\'s later changes alone); "events" one event per message, as logs written before commits.',
        'Events/s: the store\'s events over the seconds each command printed (rebuild: from taking the lease, drop and migrations included, to the checkpoint reaching the last message).',
      ],
    };
  },
};
