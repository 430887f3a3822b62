/**
 * The acceptance floor (issue 21, aims 5 and 6): what the least possible design that
 * keeps the contract's promise reaches on this machine, next to jetcron, under the
 * closed loop `monitors` and `inbound` use (undici Pool, 64 keep-alive connections,
 * warm-up, then a measured window). Two shapes: pings (`GET /ping/<token>`) and inbound
 * requests (`POST /in/<slug>`, ~1 KB JSON). Four servers for each, every one a process of
 * its own, interleaved over rounds (the order rotates each round):
 *   bare     a `node:http` server answering 200 at once (the aims' yardstick);
 *   durable  the same, each loop turn's requests appended as ONE JetStream message
 *            (file storage, a fresh nats-server) and answered on its ack;
 *   +reader  durable, plus a reader process writing one Postgres row per request with
 *            binary COPY, many rows a transaction (`floor-reader.ts`);
 *   jetcron  the service itself (`jetcron serve`, every role), on its own nats-server
 *            and database, kept for every round: a collect-only endpoint's `/in/<slug>`
 *            and the ping URLs of interval monitors (60 s, grace 0, JETCRON_TIME_SCALE
 *            0.05, so each pinged monitor goes down 3 s later, as in `monitors`).
 * CPU per answered request of every process from /proc over the measured window; after
 * each run with a reader (the floor's or jetcron's own), the wait until it has caught up.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connectNats } from '../src/nats/connection.ts';
import { cpuPhase, forkBenchChild, hrMs, sleep, startNats, type CpuGroup, type CpuReport } from './harness.ts';
import { payload } from './inbound.ts';
import { closedLoop, HttpClient, type SendResult } from './load.ts';
import { withStack, type BenchContext, type Benchmark, type Stack } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';

const ROUNDS = Number(process.env.FLOOR_ROUNDS ?? 3);
const WARMUP_MS = Number(process.env.FLOOR_WARMUP_MS ?? 3_000);
const MEASURE_MS = Number(process.env.FLOOR_SECONDS ?? 6) * 1000;
const MONITORS = Number(process.env.FLOOR_MONITORS ?? 20_000);
const CONCURRENCY = 64;
const CATCH_UP_LIMIT_MS = 60_000;
const STREAM = 'FLOOR';
const SUBJECT = 'floor.requests';
/** With `--cpu-prof`: the shape whose first jetcron window `phase.json` marks, for `bench/profile-phase.ts`. */
const PROFILE_SHAPE = process.env.FLOOR_PROFILE_SHAPE ?? 'ping';

type Shape = 'ping' | 'inbound';
type Variant = 'bare' | 'durable' | 'durable+reader' | 'jetcron' | 'jetcron-b';
/**
 * `FLOOR_B_ENV="JETCRON_X=1 JETCRON_Y=2"`: a second jetcron (`jetcron-b`, its own stack) with
 * those settings, in the same rounds: a setting's effect measured against the floor.
 */
const B_ENV = Object.fromEntries((process.env.FLOOR_B_ENV ?? '').split(/\s+/).filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
/** `FLOOR_INTERVAL_S`: jetcron's monitors' interval (60: each goes down 3 s after its ping, as in `monitors`). */
const A_INTERVAL_S = Number(process.env.FLOOR_INTERVAL_S ?? 60);
/** `FLOOR_B_INTERVAL_S`: jetcron-b's monitors' interval (e.g. 86400: none goes down within the run, so its pings are pings alone). */
const B_INTERVAL_S = Number(process.env.FLOOR_B_INTERVAL_S ?? 60);
const HAS_B = Object.keys(B_ENV).length > 0 || process.env.FLOOR_B_INTERVAL_S !== undefined;
/** `FLOOR_VARIANTS` / `FLOOR_SHAPES`: a subset, comma-separated (bare always runs: it is the yardstick). */
const pick = <T extends string>(all: T[], env: string | undefined): T[] => (env ? all.filter((x) => x === 'bare' || env.split(',').includes(x)) : all);
const VARIANTS: Variant[] = pick<Variant>(['bare', 'durable', 'durable+reader', 'jetcron', ...(HAS_B ? ['jetcron-b' as const] : [])], process.env.FLOOR_VARIANTS);
const SHAPES: Shape[] = pick<Shape>(['ping', 'inbound'], process.env.FLOOR_SHAPES);

interface Run {
  round: number;
  shape: Shape;
  variant: Variant;
  ok: number;
  rate: number;
  p50: number;
  p99: number;
  /** CPU ms per answered request, by process. */
  cpu: Record<string, number>;
  otherPct: number;
  machineBusyPct: number;
  /** Time after the window until the reader (floor's or jetcron's) was done with the backlog. */
  catchUpMs?: number | undefined;
}


/** Asks the floor reader how far it has written. */
function readerProgress(child: ChildProcess): Promise<{ rows: number; seq: number }> {
  return new Promise((resolve) => {
    const id = Math.random();
    const on = (m: any) => {
      if (m?.id !== id) return;
      child.off('message', on);
      resolve(m);
    };
    child.on('message', on);
    child.send({ id });
  });
}

/** The closed loop: warm-up, then the measured window between `onMeasure` and the return. */
async function drive(client: HttpClient, send: (c: HttpClient, i: number) => Promise<SendResult>, accepted: (r: SendResult) => boolean, onMeasure: () => void) {
  await closedLoop({ concurrency: CONCURRENCY, maxCount: Number.MAX_SAFE_INTEGER, maxMs: WARMUP_MS, fn: (i) => send(client, i) });
  onMeasure();
  const ms: number[] = [];
  let bad = 0;
  const run = await closedLoop({
    concurrency: CONCURRENCY,
    maxCount: Number.MAX_SAFE_INTEGER,
    maxMs: MEASURE_MS,
    fn: async (i) => {
      const r = await send(client, i + 1_000_000);
      if (accepted(r)) ms.push(r.ms);
      else bad++;
    },
  });
  return { ok: ms.length, bad, elapsedMs: run.elapsedMs, ms };
}

/** Samples `pid`'s CPU (with descendants) every 500 ms until under 10% of a core: a service's backlog done. */
async function quiet(groups: CpuGroup[], limitMs: number): Promise<number> {
  const t0 = hrMs();
  while (hrMs() - t0 < limitMs) {
    const end = cpuPhase(groups);
    await sleep(500);
    const r = end();
    if (r.rows.filter((x) => !x.detail && x.name !== 'other processes on the machine').every((x) => x.pctOfCore < 10)) return hrMs() - t0 - 500;
  }
  return Number.NaN;
}

export const acceptanceFloor: Benchmark = {
  name: 'acceptance-floor',
  title: `The acceptance floor: pings and ~1 KB inbound POSTs at c${CONCURRENCY} against a bare node:http server, the same made durable (one JetStream message per loop turn), plus a Postgres reader (binary COPY), and jetcron; ${ROUNDS} interleaved rounds`,
  run(ctx) {
    return withStack(
      ctx,
      this.name,
      async (s) => {
        if (!HAS_B) return rounds(ctx, this.name, this.title, s, undefined);
        return withStack(ctx, `${this.name}-b`, (b) => rounds(ctx, this.name, this.title, s, b), { plan: 'pro', env: { JETCRON_TIME_SCALE: '0.05', ...B_ENV } });
      },
      { plan: 'pro', env: { JETCRON_TIME_SCALE: '0.05' } },
    );
  },
};

/** A jetcron stack's monitors' ping paths and collect-only endpoint, and where its round-robin stands. */
interface Target {
  stack: Stack;
  pingPaths: string[];
  inboundPath: string;
  offset: number;
}

async function rounds(ctx: BenchContext, name: string, title: string, s: Stack, sb: Stack | undefined) {
        const pg = await ctx.postgres();
        const prepare = async (stack: Stack, intervalS: number): Promise<Target> => ({ stack, pingPaths: await createMonitors(stack, ctx.log, intervalS), inboundPath: await createCollectEndpoint(stack), offset: 0 });
        const a = await prepare(s, A_INTERVAL_S);
        const b = sb ? await prepare(sb, B_INTERVAL_S) : undefined;
        const runs: Run[] = [];
        const targetOf = (variant: Variant) => (variant === 'jetcron' ? a : variant === 'jetcron-b' ? b : undefined);
        const sendFor = (shape: Shape, variant: Variant) => {
          const t = targetOf(variant);
          if (shape === 'inbound') return (c: HttpClient, i: number) => c.send('POST', t ? t.inboundPath : '/in/ep_floor', { body: payload(`f${i}`) });
          if (!t) return (c: HttpClient, i: number) => c.send('GET', `/ping/pm_floor${i % MONITORS}`);
          // Round-robin over the monitors, carrying on where the last run stopped, so each ping
          // finds its monitor down (3 s after its previous one) and is a transition, as in `monitors`.
          return (c: HttpClient) => c.send('GET', t.pingPaths[t.offset++ % t.pingPaths.length]!);
        };
        const acceptedFor = (shape: Shape, variant: Variant) =>
          targetOf(variant) && shape === 'inbound' ? (r: SendResult) => r.status === 200 && r.text.includes('"received"') : (r: SendResult) => r.status === 200;

        for (let round = 1; round <= ROUNDS; round++) {
          for (const shape of SHAPES) {
            const order = VARIANTS.map((_, i) => VARIANTS[(i + round - 1) % VARIANTS.length]!);
            for (const variant of order) {
              ctx.log(`acceptance-floor: round ${round}, ${shape}, ${variant}`);
              const t = targetOf(variant);
              const mark = ctx.cpuProfDir && variant === 'jetcron' && shape === PROFILE_SHAPE && round === 1 ? path.join(ctx.cpuProfDir, name) : undefined;
              const run = t
                ? await jetcronRun(t.stack, pg.postmasterPid, sendFor(shape, variant), acceptedFor(shape, variant), mark)
                : await floorRun(variant, pg, sendFor(shape, variant), acceptedFor(shape, variant));
              runs.push({ round, shape, variant, ...run });
              ctx.log(`acceptance-floor: ${fmt.rate(run.rate)}, CPU ${Object.entries(run.cpu).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(', ')} ms per request`);
            }
          }
        }
        return report(name, title, runs);
}

async function createMonitors(s: Stack, log: (m: string) => void, intervalS: number): Promise<string[]> {
  const paths: string[] = [];
  const t0 = hrMs();
  await closedLoop({
    concurrency: CONCURRENCY,
    maxCount: MONITORS,
    maxMs: 300_000,
    fn: async (i) => {
      const r = await s.api.send('POST', '/api/v1/monitors', { body: JSON.stringify({ name: `floor-${i}`, schedule_type: 'interval', interval_seconds: intervalS, grace_period_seconds: 0 }) });
      if (r.status === 201) paths.push(new URL((JSON.parse(r.text) as { data: { ping_url: string } }).data.ping_url).pathname);
    },
  });
  log(`acceptance-floor: ${paths.length} monitors created in ${((hrMs() - t0) / 1000).toFixed(1)} s`);
  if (paths.length < MONITORS / 2) throw new Error(`only ${paths.length} of ${MONITORS} monitors created`);
  return paths;
}

async function createCollectEndpoint(s: Stack): Promise<string> {
  const r = await s.api.send('POST', '/api/v1/endpoints', { body: JSON.stringify({ name: 'floor-collect', forward_urls: [], use_lane: false }) });
  if (r.status !== 201) throw new Error(`POST /api/v1/endpoints answered ${r.status}: ${r.text.slice(0, 200)}`);
  return new URL((JSON.parse(r.text) as { data: { inbound_url: string } }).data.inbound_url).pathname;
}

type Send = (c: HttpClient, i: number) => Promise<SendResult>;
type Accepted = (r: SendResult) => boolean;

function perRequest(report: CpuReport, ok: number): { cpu: Record<string, number>; otherPct: number; machineBusyPct: number } {
  const cpu: Record<string, number> = {};
  let otherPct = 0;
  for (const row of report.rows) {
    if (row.detail) continue;
    if (row.name === 'other processes on the machine') otherPct += row.pctOfCore;
    else cpu[row.name] = (1000 * row.cpuSeconds) / Math.max(1, ok);
    // The service's processes are counted in its row too: cpuPhase took them off "other processes" twice.
    if (row.name.startsWith('jetcron ')) otherPct += row.pctOfCore;
  }
  return { cpu, otherPct, machineBusyPct: report.machineBusyPct };
}

/** One run of a floor server (bare, durable, durable + reader), each part fresh. */
async function floorRun(variant: Variant, pg: { postmasterPid(): number | undefined; createDatabase(prefix: string): Promise<{ url: string; drop: () => Promise<void> }> }, send: Send, accepted: Accepted) {
  const stops: (() => Promise<void>)[] = [];
  try {
    let natsUrl = '';
    let natsPid: () => number | undefined = () => undefined;
    if (variant !== 'bare') {
      const nats = await startNats();
      stops.push(nats.stop);
      natsUrl = nats.url;
      natsPid = () => nats.pid();
      const admin = await connectNats(nats.url, 'floor-admin');
      // As the project's INBOUND: file storage, limits retention, the default duplicate window.
      await admin.jsm.streams.add({ name: STREAM, subjects: [SUBJECT], storage: StorageType.File, retention: RetentionPolicy.Limits, duplicate_window: 120_000_000_000 });
      await admin.close();
    }
    let reader: ChildProcess | undefined;
    if (variant === 'durable+reader') {
      const db = await pg.createDatabase('floor');
      stops.push(db.drop);
      const r = await forkBenchChild('floor-reader.ts', [natsUrl, STREAM, db.url]);
      stops.push(r.stop);
      reader = r.child;
    }
    const server = await forkBenchChild('floor-server.ts', variant === 'bare' ? ['bare'] : ['durable', natsUrl, SUBJECT]);
    stops.push(server.stop);
    const client = new HttpClient(`http://127.0.0.1:${server.ready.port}`, CONCURRENCY);
    stops.push(() => client.close());
    const groups: CpuGroup[] = [
      { name: 'server', pid: () => server.child.pid, withDescendants: false },
      { name: 'nats-server', pid: natsPid, withDescendants: false },
      { name: 'reader', pid: () => reader?.pid, withDescendants: false },
      { name: 'postgres', pid: () => pg.postmasterPid(), withDescendants: true },
      { name: 'load generator', pid: () => process.pid, withDescendants: false },
    ];
    let end!: () => CpuReport;
    const d = await drive(client, send, accepted, () => (end = cpuPhase(groups)));
    const cpu = perRequest(end(), d.ok);
    let catchUpMs: number | undefined;
    if (reader) {
      const admin = await connectNats(natsUrl, 'floor-admin');
      const last = (await admin.jsm.streams.info(STREAM)).state.last_seq;
      await admin.close();
      const t0 = hrMs();
      while ((await readerProgress(reader)).seq < last && hrMs() - t0 < CATCH_UP_LIMIT_MS) await sleep(50);
      catchUpMs = hrMs() - t0;
    }
    const lat = summarize(d.ms);
    return { ok: d.ok, rate: d.ok / (d.elapsedMs / 1000), p50: lat.p50, p99: lat.p99, ...cpu, catchUpMs };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  }
}

/**
 * The service's child process whose roles include `api` (`api: true`) or not, from
 * /proc (its JETCRON_ROLES, set by `src/runtime/process-group.ts`): where the CPU goes.
 */
function serviceChild(parent: number, api: boolean): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent) continue;
      const roles = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').find((kv) => kv.startsWith('JETCRON_ROLES='));
      if (roles !== undefined && roles.slice('JETCRON_ROLES='.length).split(',').includes('api') === api) return Number(name);
    } catch {
      /* gone, or not ours to read */
    }
  }
  return undefined;
}

/** One run against the stack's jetcron; afterwards, the wait until the service, nats-server and Postgres are quiet again. */
async function jetcronRun(s: Stack, postmasterPid: () => number | undefined, send: Send, accepted: Accepted, profileDir?: string) {
  const client = new HttpClient(s.service.url, CONCURRENCY);
  const apiPid = serviceChild(s.service.pid, true);
  const otherPid = serviceChild(s.service.pid, false);
  try {
    const groups: CpuGroup[] = [
      { name: 'server', pid: () => s.service.pid, withDescendants: true },
      { name: 'jetcron api process', pid: () => apiPid, withDescendants: false },
      { name: 'jetcron other roles', pid: () => otherPid, withDescendants: false },
      { name: 'nats-server', pid: () => s.nats.pid(), withDescendants: false },
      { name: 'reader', pid: () => undefined, withDescendants: false },
      { name: 'postgres', pid: postmasterPid, withDescendants: true },
      { name: 'load generator', pid: () => process.pid, withDescendants: false },
    ];
    let end!: () => CpuReport;
    let fromUs = 0;
    const d = await drive(client, send, accepted, () => ((end = cpuPhase(groups)), (fromUs = Number(process.hrtime.bigint() / 1000n))));
    const cpu = perRequest(end(), d.ok);
    if (profileDir) {
      // The window on the monotonic clock V8's profile timestamps use: the profile covers the whole run.
      mkdirSync(profileDir, { recursive: true });
      writeFileSync(path.join(profileDir, 'phase.json'), JSON.stringify({ fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }));
    }
    // Its readers' backlog (projector, the goings down 3 s after the pings) must not run into the next run.
    const catchUpMs = await quiet(groups.filter((g) => g.name !== 'load generator' && !g.name.startsWith('jetcron ')), CATCH_UP_LIMIT_MS);
    const lat = summarize(d.ms);
    return { ok: d.ok, rate: d.ok / (d.elapsedMs / 1000), p50: lat.p50, p99: lat.p99, ...cpu, catchUpMs };
  } finally {
    await client.close();
  }
}

const median = (xs: number[]) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!v.length) return Number.NaN;
  return v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
};

const PROCS = ['server', 'nats-server', 'reader', 'postgres', 'load generator'];
/** jetcron's server row split by process (the api process; the other roles' process). */
const SPLIT = ['jetcron api process', 'jetcron other roles'];

function report(name: string, title: string, runs: Run[]) {
  const bareOf = (r: Run) => runs.find((b) => b.round === r.round && b.shape === r.shape && b.variant === 'bare')!.rate;
  const perRound: Table = {
    headers: ['round', 'shape', 'variant', 'answered/s', '× bare', 'p50 / p99', ...PROCS.map((p) => `${p} ms/req`), 'sum ms/req', 'jetcron api / other', 'other procs', 'machine busy', 'catch-up'],
    rows: runs.map((r) => [
      String(r.round), r.shape, r.variant, fmt.rate(r.rate), fmt.frac(r.rate / bareOf(r)), `${fmt.ms(r.p50)} / ${fmt.ms(r.p99)}`,
      ...PROCS.map((p) => (r.cpu[p] ? r.cpu[p]!.toFixed(3) : '–')),
      PROCS.filter((p) => p !== 'load generator').reduce((a, p) => a + (r.cpu[p] ?? 0), 0).toFixed(3),
      r.cpu[SPLIT[0]!] === undefined ? '–' : SPLIT.map((p) => (r.cpu[p] ?? 0).toFixed(3)).join(' / '),
      fmt.pct(r.otherPct), fmt.pct(r.machineBusyPct), r.catchUpMs === undefined ? '–' : fmt.s(r.catchUpMs / 1000),
    ]),
  };
  const summary: Table = {
    headers: ['shape', 'variant', 'answered/s (median)', '× bare (median of rounds)', ...PROCS.map((p) => `${p} ms/req`), 'sum (not load gen.)'],
    rows: [],
  };
  const headline = [];
  for (const shape of SHAPES) {
    for (const variant of VARIANTS) {
      const rs = runs.filter((r) => r.shape === shape && r.variant === variant);
      const ratio = median(rs.map((r) => r.rate / bareOf(r)));
      const cpus = PROCS.map((p) => median(rs.map((r) => r.cpu[p] ?? 0)));
      summary.rows.push([shape, variant, fmt.rate(median(rs.map((r) => r.rate))), fmt.frac(ratio), ...cpus.map((c) => (c ? c.toFixed(3) : '–')), cpus.slice(0, 4).reduce((a, b) => a + b, 0).toFixed(3)]);
      if (variant !== 'bare') headline.push({ label: `${shape}: ${variant} × bare`, value: fmt.frac(ratio), ok: variant.startsWith('jetcron') ? ratio >= 0.5 : undefined });
    }
  }
  return {
    name,
    title,
    metrics: summary.rows.map((row) => ({ label: `${row[0]} ${row[1]}`, value: `${row[2]} (× bare ${row[3]}), CPU ms/req ${row.slice(4).join(' / ')}` })),
    headline,
    tables: [{ title: 'medians over the rounds (CPU ms per answered request, from /proc, measured window)', table: summary }, { title: 'every run, in the order run', table: perRound }],
    notes: [
      `closed loop: undici Pool, ${CONCURRENCY} keep-alive connections, ${WARMUP_MS / 1000} s warm-up, ${MEASURE_MS / 1000} s measured; ${ROUNDS} rounds, the variants' order rotating each round; × bare = against the bare server of the same round and shape.`,
      'floor servers, nats-servers (fresh per run, file storage) and readers are processes of their own (bench/floor-server.ts, bench/floor-reader.ts); Postgres is the run\'s shared embedded one (a fresh database per reader run); jetcron is one `jetcron serve` (every role) with its own nats-server, kept for every round, idle during the floor runs.',
      'catch-up: for the floor\'s reader, the time after the window until its checkpoint reached the stream\'s last message; for jetcron, until the service, its nats-server and Postgres each used under 10% of a core for 0.5 s (its projector, the goings down 3 s after the pings).',
      ...(HAS_B ? [`jetcron-b: a second jetcron stack (its own nats-server and database) with ${Object.entries(B_ENV).map(([k, v]) => `${k}=${v}`).join(' ') || 'the same settings'}, monitors of ${B_INTERVAL_S} s, idle while the others run.`] : []),
      `jetcron pings: ${MONITORS.toLocaleString('en-US')} interval monitors (${A_INTERVAL_S} s, grace 0, JETCRON_TIME_SCALE=0.05), pinged round-robin${A_INTERVAL_S * 0.05 <= 3 ? ', so each ping finds its monitor down and is a transition' : ''}; inbound: a collect-only endpoint, 200 with "received" counted.`,
    ],
  };
}
