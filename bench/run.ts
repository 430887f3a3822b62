/**
 * jetcron benchmarks: `npm run bench [-- names...] [--cpu-prof]`.
 * Runs the selected benchmarks (all by default) one after another, each on its
 * own nats-server, database, target server and `jetcron serve` child process,
 * prints a table per benchmark and writes bench/results/latest.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { acceptanceFloor } from './acceptance-floor.ts';
import { batchAccept } from './batch-accept.ts';
import { bulkRetry } from './bulk-retry.ts';
import { createApi } from './create-api.ts';
import { dispatchThroughput } from './dispatch-throughput.ts';
import { executionsList } from './executions-list.ts';
import { flowControl } from './flow-control.ts';
import { cleanupAll, cpuPhase, natsServerVersion, RESULTS_DIR, ROOT, sleep, startSharedPostgres, type CpuReport, type SharedPostgres } from './harness.ts';
import { idempotentReplay } from './idempotent-replay.ts';
import { inbound } from './inbound.ts';
import { lanes } from './lanes.ts';
import { lua } from './lua.ts';
import { latency } from './latency.ts';
import { summarizeBusiestProfile, type ProfileSummary } from './profile.ts';
import { monitors } from './monitors.ts';
import { peers } from './peers/peers.ts';
import { reference } from './reference.ts';
import { rebuild } from './rebuild.ts';
import { runtime } from './runtime.ts';
import { schedules, schedulesEverySecond } from './schedules.ts';
import { soak } from './soak.ts';
import type { BenchContext, BenchResult, Benchmark, Metric } from './stack.ts';
import { fmt, markdownTable, textTable, type Table } from './stats.ts';
import { timers } from './timers.ts';
import { tracing } from './tracing.ts';

/** The default run (`npm run bench` without names). */
const ALL: Benchmark[] = [reference, dispatchThroughput, latency, timers, createApi, lanes, batchAccept, idempotentReplay, schedules, schedulesEverySecond, monitors, inbound, lua, tracing, runtime, rebuild, peers];
/** Run only when named: `soak` alone takes ~10 minutes (1,000,000 executions). */
const OPT_IN: Benchmark[] = [soak, executionsList, flowControl, acceptanceFloor, bulkRetry];
const KNOWN: Benchmark[] = [...ALL, ...OPT_IN];
const RUN_LIMIT_MS = 30 * 60_000;

const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(`usage: npm run bench -- [${KNOWN.map((b) => b.name).join('|')} ...] [--cpu-prof]

  no names     run every benchmark but the opt-in ones (${OPT_IN.map((b) => b.name).join(', ')}), which run only when named
  --cpu-prof   run the service under node --cpu-prof and print where its CPU time went
               (profiles in bench/results/profiles/; bench/profile-phase.ts cuts them to a phase)

  BENCH_PG_STATEMENTS=1  Postgres with pg_stat_statements: a benchmark that reads it (bulk-retry)
                         notes each statement's time, blocks and WAL per item`);
  process.exit(0);
}
const cpuProf = argv.includes('--cpu-prof');
const names = argv.filter((a) => !a.startsWith('--'));
const unknown = names.filter((n) => !KNOWN.some((b) => b.name === n));
if (unknown.length) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; choose from ${KNOWN.map((b) => b.name).join(', ')}`);
  process.exit(2);
}
// The raw loop is the yardstick for the others, so it always runs first.
const selected = KNOWN.filter((b) => b.name === 'reference' || (names.length === 0 ? ALL.includes(b) : names.includes(b.name)));

const log = (m: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 23)}] ${m}\n`);
const watchdog = setTimeout(() => {
  log(`the whole run exceeded ${RUN_LIMIT_MS / 60_000} min; stopping (the exit hook kills and removes everything)`);
  process.exit(1);
}, RUN_LIMIT_MS);
watchdog.unref();

const profDir = path.join(RESULTS_DIR, 'profiles');
if (cpuProf) {
  rmSync(profDir, { recursive: true, force: true });
  mkdirSync(profDir, { recursive: true });
}

let sharedPg: Promise<SharedPostgres> | undefined;
const ctx: BenchContext = {
  postgres() {
    sharedPg ??= (log('starting the shared embedded Postgres'), startSharedPostgres());
    return sharedPg;
  },
  rawRate: undefined,
  cpuProfDir: cpuProf ? profDir : undefined,
  log,
};

// Other work on the machine skews every figure: measure it for a second before starting.
const idleCheck = cpuPhase([]);
await sleep(1000);
const busyBefore = idleCheck().machineBusyPct;
if (busyBefore > 15) log(`WARNING: the machine was ${busyBefore.toFixed(0)}% busy (all cores) before the run started; figures will be skewed`);

const startedAt = new Date();
const results: BenchResult[] = [];
const profiles: { name: string; summary: ProfileSummary }[] = [];
let failed = false;

try {
  for (const b of selected) {
    log(`── ${b.name} ──`);
    const t = Date.now();
    let result: BenchResult;
    try {
      result = await b.run(ctx);
    } catch (err) {
      failed = true;
      result = {
        name: b.name,
        title: b.title,
        metrics: [{ label: 'FAILED', value: (err as Error).message.split('\n')[0]!, ok: false }],
        headline: [{ label: `${b.name}: FAILED`, value: (err as Error).message.split('\n')[0]!, ok: false }],
        tables: [],
        notes: [(err as Error).stack ?? String(err)],
      };
    }
    result.notes.push(`benchmark wall time ${fmt.s((Date.now() - t) / 1000)} including start and teardown.`);
    results.push(result);
    console.log(`\n${renderText(result)}\n`);
    const summary = cpuProf && existsSync(path.join(profDir, b.name)) ? summarizeBusiestProfile(path.join(profDir, b.name)) : undefined;
    if (summary) {
      profiles.push({ name: b.name, summary });
      console.log(renderProfileText(b.name, summary));
    }
  }
} finally {
  await cleanupAll();
}

const pgVersion = sharedPg ? await sharedPg.then((p) => p.version, () => '?') : 'not started';
const summary = summaryTable(results);
console.log(`\n== Summary ==\n${textTable(summary)}\n\njetcron ${sourceVersion()}; machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, Node ${process.version}, ${natsServerVersion()}, Postgres ${pgVersion}; ${fmt.pct(busyBefore)} busy in the second before the run${inheritedSettings() ? `\nservice settings from the environment: ${inheritedSettings()}` : ''}\n`);
writeMarkdown();
console.log(`results written to ${path.relative(process.cwd(), path.join(RESULTS_DIR, 'latest.md'))}`);
process.exit(failed ? 1 : 0);

// ---------------------------------------------------------------- rendering

/** The commit measured, and whether src/ had uncommitted changes (read-only git). */
function sourceVersion(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'streams', 'bin'], { cwd: ROOT, encoding: 'utf8' }).trim();
    return dirty ? `${head} + uncommitted changes in ${dirty.split('\n').length} file(s) under src/, streams/, bin/` : head;
  } catch {
    return 'unknown (no git)';
  }
}

/** JETCRON_* variables of this process reach the service (for experiments); the run records them. JETCRON_SOAK_TASKS is the soak benchmark's, not the service's. */
function inheritedSettings(): string {
  return Object.entries(process.env)
    .filter(([k]) => (k.startsWith('JETCRON_') || k === 'BENCH_SERVICE_NODE_OPTIONS') && !['JETCRON_ALLOW_PRIVATE_TARGETS', 'JETCRON_RATE_LIMIT_FREE', 'JETCRON_RATE_LIMIT_PRO', 'JETCRON_ROLES', 'JETCRON_SOAK_TASKS'].includes(k))
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function status(m: Metric): string {
  return m.ok === undefined ? '' : m.ok ? 'ok' : 'MISS';
}

function metricTable(r: BenchResult): Table {
  const withGoals = r.metrics.some((m) => m.goal !== undefined);
  return {
    headers: withGoals ? ['metric', 'value', 'goal', ''] : ['metric', 'value'],
    rows: r.metrics.map((m) => (withGoals ? [m.label, m.value, m.goal ?? '', status(m)] : [m.label, m.value])),
  };
}

function cpuTable(cpu: NonNullable<BenchResult['cpu']>): Table {
  const { report, units } = cpu;
  const per = (s: number) => (units && units.count > 0 ? [`${((1000 * s) / units.count).toFixed(3)}`] : []);
  return {
    headers: ['process', 'CPU s', '% of one core', ...(units ? [`CPU ms per ${units.what}`] : [])],
    rows: [
      ...report.rows.map((r) => [r.name, r.cpuSeconds.toFixed(2), fmt.pct(r.pctOfCore), ...per(r.cpuSeconds)]),
      ...stackRow(report, per),
      [`machine, all ${os.cpus().length} cores (any process)`, '', `${fmt.pct(report.machineBusyPct)} busy`, ...(units ? [''] : [])],
    ],
  };
}

/** The service and what it needs (jetcron + nats-server + postgres), when the phase had them. */
function stackRow(report: CpuReport, per: (s: number) => string[]): string[][] {
  const parts = report.rows.filter((r) => !r.detail && /^(jetcron|nats-server|postgres)/.test(r.name));
  if (parts.length < 3) return [];
  const s = parts.reduce((a, r) => a + r.cpuSeconds, 0);
  return [['= jetcron + nats-server + postgres', s.toFixed(2), fmt.pct((100 * s) / report.wallSeconds), ...per(s)]];
}

function renderText(r: BenchResult): string {
  const parts = [`== ${r.name}: ${r.title} ==`, textTable(metricTable(r))];
  for (const t of r.tables) parts.push(`${t.title}:\n${textTable(t.table)}`);
  if (r.cpu) parts.push(`CPU during ${r.cpu.phase} (${fmt.s(r.cpu.report.wallSeconds)}):\n${textTable(cpuTable(r.cpu))}`);
  if (r.notes.length) parts.push(r.notes.map((n) => `note: ${n}`).join('\n'));
  return parts.join('\n\n');
}

function profileCaption(s: ProfileSummary): string {
  return `${fmt.s(s.busyMs / 1000)} busy of ${fmt.s(s.totalMs / 1000)} sampled on the main thread over the service's whole lifetime; ${path.relative(process.cwd(), s.file)}`;
}

function renderProfileText(name: string, s: ProfileSummary): string {
  return [
    `-- service CPU profile for ${name} (${profileCaption(s)}) --`,
    textTable(s.byEntry),
    textTable(s.byCaller),
    textTable(s.byWhere),
    textTable(s.byFunction),
    '',
  ].join('\n\n');
}

function summaryTable(rs: BenchResult[]): Table {
  return {
    headers: ['benchmark', 'metric', 'value', 'goal', ''],
    rows: rs.flatMap((r) => r.headline.map((m) => [r.name, m.label, m.value, m.goal ?? '', status(m)])),
  };
}

function writeMarkdown(): void {
  const cpus = os.cpus();
  const lines: string[] = [
    '# jetcron benchmark results',
    '',
    `Run ${startedAt.toISOString()} (${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)} s), \`npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}\`.`,
    'Everything on one machine over loopback: the load generator (this process), `jetcron serve` (child process, all roles), the target server (forked child), nats-server and Postgres.',
    '',
    '## Machine',
    '',
    markdownTable({
      headers: ['', ''],
      rows: [
        ['CPU', `${cpus[0]?.model ?? '?'} × ${cpus.length} (${cpus[0]?.speed ? `${cpus[0].speed} MHz` : 'speed not reported'})`],
        ['memory', `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
        ['OS', `${os.type()} ${os.release()} ${os.arch()}`],
        ['jetcron source', sourceVersion()],
        ['Node', process.version],
        ['nats-server', natsServerVersion()],
        ['Postgres', pgVersion],
        ['machine busy in the second before the run', fmt.pct(busyBefore)],
        ['JETCRON_* settings passed to the service', inheritedSettings() || 'none (defaults)'],
        ['load average at the end', os.loadavg().map((x) => x.toFixed(2)).join(' ')],
      ],
    }),
    '',
    '## Summary',
    '',
    markdownTable(summaryTable(results)),
    '',
  ];
  for (const r of results) {
    lines.push(`## ${r.name}`, '', r.title, '', markdownTable(metricTable(r)), '');
    for (const t of r.tables) lines.push(`**${t.title}**`, '', markdownTable(t.table), '');
    if (r.cpu) lines.push(`**CPU during ${r.cpu.phase}** (${fmt.s(r.cpu.report.wallSeconds)})`, '', markdownTable(cpuTable(r.cpu)), '');
    if (r.notes.length) lines.push(...r.notes.map((n) => `- ${n.replace(/\n/g, ' ')}`), '');
    const prof = profiles.find((p) => p.name === r.name);
    if (prof) {
      lines.push(`**Service CPU profile** (${profileCaption(prof.summary)})`, '');
      lines.push(markdownTable(prof.summary.byEntry), '', markdownTable(prof.summary.byCaller), '', markdownTable(prof.summary.byWhere), '', markdownTable(prof.summary.byFunction), '');
    }
  }
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(path.join(RESULTS_DIR, 'latest.md'), `${lines.join('\n')}\n`);
}
