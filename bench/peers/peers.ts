/**
 * jetcron next to what users compare it with, all doing the same HTTP job (one POST
 * to the bench's target, which answers 200 at once), 10,000 jobs each:
 *   raw undici loop · pg-boss · BullMQ · jetcron with lanes · jetcron without lanes,
 * interleaved over 3 rounds (round r runs each once, in that order), each run on
 * fresh state (a new database, a flushed redis, a new jetcron stack). Reports the
 * median jobs/s per system, each round's figure, the ratios the aims are written in,
 * and the CPU per job of every process involved.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, startTarget, type CpuReport } from '../harness.ts';
import { checkLanes, runLanes } from '../lanes.ts';
import type { EndToEndRun } from '../progress.ts';
import { runDispatch } from '../dispatch-throughput.ts';
import { rawLoop } from '../reference.ts';
import { withStack, type BenchContext, type Benchmark, type Metric, type Stack } from '../stack.ts';
import { fmt, type Table } from '../stats.ts';
import { BULLMQ_CONCURRENCY, runBullmq } from './bullmq.ts';
import { PG_BOSS_OPTIONS, runPgBoss } from './pg-boss.ts';
import { runFloor } from './floor.ts';
import { redisServer, startRedis, type BenchRedis } from './processes.ts';
import { ADD_BATCH, JOBS, QUEUE_WARMUP, type SystemRun } from './queue-run.ts';

const ROUNDS = 3;
const LANES_AIM = 1.0;
const LANES_STRETCH = 1.5;
const LANE_FREE_AIM = 0.4;

type Outcome = SystemRun | { error: string };

interface System {
  label: string;
  /** Why it does not run in this benchmark, if it does not. */
  skipped?: string;
  run(round: number): Promise<SystemRun>;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

async function raw(): Promise<SystemRun> {
  const target = await startTarget();
  try {
    const r = await rawLoop(target, JOBS);
    const ok = r.outcomes.count('200');
    return {
      rate: r.rate,
      jobs: r.latencies.length,
      seconds: r.elapsedMs / 1000,
      complete: r.latencies.length === JOBS,
      cpu: r.cpu,
      check: `target received ${r.received}; outcomes incl. 2,000 warm-up: ${r.outcomes.describe()}${ok < JOBS ? ' (NOT ALL 200)' : ''}`,
    };
  } finally {
    await target.stop();
  }
}

/** One jetcron run on a fresh stack; `measure` returns the run and its own checks. */
function jetcron(ctx: BenchContext, name: string, measure: (s: Stack) => Promise<[EndToEndRun<unknown>, string]>): Promise<SystemRun> {
  return withStack(ctx, name, async (s) => {
    const [r, checks] = await measure(s);
    const st = await s.target.stats();
    const complete = r.pgCompleteAt !== undefined;
    return {
      rate: r.execRate,
      jobs: r.finalSuccess,
      seconds: r.e2eSeconds,
      complete,
      cpu: r.cpu,
      check: `${checks}; success ${r.finalSuccess}; target: ${st.unique} distinct, ${st.duplicates} repeated${complete ? '' : '; NOT ALL SUCCESS'}`,
    };
  });
}

const jetcronLanes = (ctx: BenchContext, round: number) =>
  jetcron(ctx, `peers-lanes-${round}`, async (s) => {
    const r = await runLanes(s);
    const c = checkLanes(await s.target.lanes(), r.laneNames, JOBS / r.laneNames.length);
    return [r, `${r.tasksAccepted} accepted; lanes checked: ${c.lanesChecked}, overlaps: ${c.overlaps}, out of order: ${c.outOfOrder}`];
  });

const jetcronLaneFree = (ctx: BenchContext, round: number) =>
  jetcron(ctx, `peers-dispatch-${round}`, async (s) => {
    const r = await runDispatch(s);
    return [r, `${r.createdOk} created (201)`];
  });

const OTHERS = 'other processes on the machine';

/**
 * CPU per job of each process group, summed over a system's runs; a group's main-thread
 * line stays under it. Then the system's own processes together, the rest of the machine.
 */
function cpuRows(label: string, runs: SystemRun[]): string[][] {
  const sums = new Map<string, { name: string; detail: boolean; cpu: number }>();
  let jobs = 0;
  let wall = 0;
  let busy = 0;
  for (const run of runs) {
    jobs += run.jobs;
    wall += run.cpu.wallSeconds;
    busy += run.cpu.machineBusyPct * run.cpu.wallSeconds;
    let group = '';
    for (const row of run.cpu.rows) {
      if (!row.detail) group = row.name;
      const key = row.detail ? `${group} / ${row.name}` : row.name;
      const sum = sums.get(key) ?? { name: row.name, detail: !!row.detail, cpu: 0 };
      sum.cpu += row.cpuSeconds;
      sums.set(key, sum);
    }
  }
  const line = (name: string, cpu: number) => [label, name, jobs > 0 ? ((1000 * cpu) / jobs).toFixed(3) : '–', fmt.pct(wall > 0 ? (100 * cpu) / wall : NaN)];
  const groups = [...sums.values()].filter((x) => x.name !== OTHERS);
  const own = groups.filter((x) => !x.detail).reduce((a, x) => a + x.cpu, 0);
  return [
    ...groups.map((x) => line(x.name, x.cpu)),
    line('= all of the above', own),
    line(OTHERS, sums.get(OTHERS)?.cpu ?? 0),
    [label, 'machine, all cores (any process)', '', `${fmt.pct(wall > 0 ? busy / wall : NaN)} busy`],
  ];
}

export const peers: Benchmark = {
  name: 'peers',
  title: `jetcron next to a raw undici loop, pg-boss and BullMQ: the same HTTP job (POST to the target), ${JOBS.toLocaleString('en-US')} jobs per run, ${ROUNDS} interleaved rounds; median jobs/s and the aims' ratios`,
  async run(ctx) {
    const postgres = await ctx.postgres();
    const redisPath = redisServer(ctx.log);
    let redis: BenchRedis | undefined;
    let redisSkip = 'missing' in redisPath ? redisPath.missing : undefined;
    if ('file' in redisPath) {
      try {
        redis = await startRedis(redisPath.file);
      } catch (err) {
        redisSkip = `redis-server did not start: ${(err as Error).message}`;
      }
    }
    const systems: System[] = [
      { label: 'raw undici loop', run: () => raw() },
      { label: 'pg-boss', run: (r) => runPgBoss(ctx, r, postgres) },
      { label: 'BullMQ', skipped: redisSkip, run: () => runBullmq(ctx, redis!) },
      { label: 'jetcron, lanes', run: (r) => jetcronLanes(ctx, r) },
      { label: 'jetcron, lane-free', run: (r) => jetcronLaneFree(ctx, r) },
      { label: 'design floor, lanes', run: (r) => runFloor(ctx, r, postgres, 'lanes') },
      { label: 'design floor, lane-free', run: (r) => runFloor(ctx, r, postgres, 'free') },
      { label: 'design floor, lane-free by HTTP', run: (r) => runFloor(ctx, r, postgres, 'http') },
    ];
    // For experiments: only the systems whose label contains one of these (comma-separated).
    const only = process.env.JETCRON_PEERS_ONLY?.split(',').filter(Boolean);
    if (only) for (const s of systems) if (!s.skipped && !only.some((o) => s.label.includes(o))) s.skipped = 'not in JETCRON_PEERS_ONLY';
    const outcomes = new Map<System, Outcome[]>(systems.map((s) => [s, []]));
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        for (const system of systems) {
          if (system.skipped) continue;
          ctx.log(`peers: round ${round}/${ROUNDS}, ${system.label}`);
          let outcome: Outcome;
          try {
            outcome = await system.run(round);
            ctx.log(`peers: ${system.label}: ${fmt.rate(outcome.rate)} (${outcome.jobs} in ${fmt.s(outcome.seconds)})`);
          } catch (err) {
            outcome = { error: (err as Error).message.split('\n')[0]! };
            ctx.log(`peers: ${system.label} failed: ${outcome.error}`);
          }
          outcomes.get(system)!.push(outcome);
        }
      }
    } finally {
      await redis?.stop();
    }

    const runsOf = (s: System) => outcomes.get(s)!.filter((o): o is SystemRun => 'rate' in o);
    const med = new Map(systems.map((s) => [s, median(runsOf(s).filter((r) => r.complete).map((r) => r.rate))]));
    const [rawSys, pgBoss, bullmq, lanes, laneFree, floorLanes, floorFree, floorHttp] = systems as [System, System, System, System, System, System, System, System];
    const rawRate = med.get(rawSys)!;
    const bestPeer = Math.max(...[pgBoss, bullmq].map((s) => med.get(s)!).filter(Number.isFinite));
    const lanesVsPeer = med.get(lanes)! / bestPeer;
    const laneFreeVsRaw = med.get(laneFree)! / rawRate;
    const peerLabel = bullmq.skipped ? 'pg-boss (BullMQ skipped)' : 'max(pg-boss, BullMQ)';

    const medianMetric = (s: System): Metric => {
      const all = outcomes.get(s)!;
      const failed = all.filter((o) => !('rate' in o) || !o.complete).length;
      return s.skipped
        ? { label: `${s.label}`, value: `skipped: ${s.skipped}`, ok: false }
        : {
            label: `${s.label}: jobs/s, median of ${ROUNDS} rounds`,
            value: `${fmt.rate(med.get(s)!)}${failed ? ` (${failed} of ${all.length} runs failed or incomplete)` : ''}`,
            ...(failed ? { ok: false } : {}),
          };
    };
    const ratio = (label: string, value: number, goal?: string, ok?: boolean): Metric => ({ label, value: fmt.frac(value), ...(goal ? { goal, ok } : {}) });
    const aims: Metric[] = [
      ratio(`jetcron lanes / ${peerLabel}`, lanesVsPeer, `≥ ${LANES_AIM.toFixed(1)} (stretch ${LANES_STRETCH.toFixed(1)})`, lanesVsPeer >= LANES_AIM),
      ratio('jetcron lane-free / raw', laneFreeVsRaw, `≥ ${LANE_FREE_AIM}`, laneFreeVsRaw >= LANE_FREE_AIM),
    ];
    const metrics: Metric[] = [
      ...systems.map(medianMetric),
      ...aims,
      ...[pgBoss, bullmq, lanes].filter((s) => !s.skipped).map((s) => ratio(`${s.label} / raw`, med.get(s)! / rawRate)),
      // How far the design itself goes here, and how much of it jetcron keeps.
      ratio(`design floor, lanes / ${peerLabel}`, med.get(floorLanes)! / bestPeer),
      ratio(`design floor, lane-free / ${peerLabel}`, med.get(floorFree)! / bestPeer),
      ratio('jetcron lanes / design floor, lanes', med.get(lanes)! / med.get(floorLanes)!),
      ratio(`design floor, lane-free by HTTP / ${peerLabel}`, med.get(floorHttp)! / bestPeer),
      ratio('jetcron lane-free / design floor, lane-free by HTTP', med.get(laneFree)! / med.get(floorHttp)!),
    ];

    const cell = (o: Outcome | undefined) => (!o ? '–' : 'error' in o ? 'failed' : `${fmt.rate(o.rate)}${o.complete ? '' : ' (incomplete)'}`);
    const perRound: Table = {
      headers: ['system', ...Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`), 'median', 'of raw'],
      rows: systems.map((s) =>
        s.skipped
          ? [s.label, ...Array.from({ length: ROUNDS }, () => 'skipped'), '–', '–']
          : [s.label, ...Array.from({ length: ROUNDS }, (_, i) => cell(outcomes.get(s)![i])), fmt.rate(med.get(s)!), fmt.frac(med.get(s)! / rawRate)],
      ),
    };
    const checks: Table = {
      headers: ['system', 'round', 'first add → all completed', 'checks'],
      rows: systems.flatMap((s) => outcomes.get(s)!.map((o, i) => [s.label, String(i + 1), 'error' in o ? '–' : fmt.s(o.seconds), 'error' in o ? `FAILED: ${o.error}` : o.check])),
    };
    const cpu: Table = {
      headers: ['system', 'process', 'CPU ms per job', '% of one core'],
      rows: systems.filter((s) => runsOf(s).length).flatMap((s) => cpuRows(s.label, runsOf(s))),
    };
    const otherCpu = systems.flatMap(runsOf).reduce((a, r) => a + otherSeconds(r.cpu), 0);
    const measuredWall = systems.flatMap(runsOf).reduce((a, r) => a + r.cpu.wallSeconds, 0);

    return {
      name: this.name,
      title: this.title,
      metrics,
      headline: [...systems.map((s) => ({ ...medianMetric(s), label: `${s.label} jobs/s (median)` })), ...aims],
      tables: [
        { title: `Jobs/s per round (${JOBS.toLocaleString('en-US')} jobs each; first add or create → all completed)`, table: perRound },
        { title: 'Each run', table: checks },
        { title: `CPU per job by process, summed over each system's rounds (measured phase only)`, table: cpu },
      ],
      notes: [
        `versions: pg-boss ${packageVersion('pg-boss')}, BullMQ ${packageVersion('bullmq')} with ioredis ${packageVersion('ioredis')}, redis-server ${redis?.version ?? 'not run'}, Postgres ${postgres.version}, undici ${packageVersion('undici')}, Node ${process.version}.`,
        `raw: the reference benchmark's loop (undici request, concurrency 64, 2,000 warm-up requests first), ${JOBS.toLocaleString('en-US')} measured.`,
        `pg-boss: a fresh database on the shared Postgres per run; producer in the bench process inserts ${ADD_BATCH.toLocaleString('en-US')} jobs per insert(); workers in their own process: work() with localConcurrency ${PG_BOSS_OPTIONS.localConcurrency} × batchSize ${PG_BOSS_OPTIONS.batchSize} (${PG_BOSS_OPTIONS.localConcurrency * PG_BOSS_OPTIONS.batchSize} jobs in flight), burstWhenBatchFull, queue notify + useListenNotify, retryLimit 0; done = the queue's rows in state 'completed'.`,
        `BullMQ: redis-server on a free port, --save '' --appendonly no, FLUSHALL before each run; producer addBulk of ${ADD_BATCH.toLocaleString('en-US')} jobs per call; one Worker in its own process, concurrency ${BULLMQ_CONCURRENCY}; default job options (1 attempt, completed jobs kept); done = getCompletedCount().`,
        `pg-boss and BullMQ: ${QUEUE_WARMUP} warm-up jobs through the same path first; each job POSTs {"id"} to the target with undici; timed from the first add until the queue reports all completed (polled every 50 ms).`,
        'jetcron: a fresh stack (nats-server, database, target, jetcron serve) per run; lanes = the lanes benchmark\'s run (100 lanes × 100 tasks, one batch per lane), lane-free = the dispatch-throughput benchmark\'s run (POST /api/v1/tasks at concurrency 64), each with its warm-up; done = all executions success in Postgres.',
        'design floor: jetcron\'s guarantees and nothing else (bench/peers/floor.ts): creates (each task\'s whole spec) as one acked JetStream message per 1,000, each job signed and sent, results (the request as sent, the response\'s status, headers and body) in group commits fenced by their partition\'s last sequence (8 partitions, one commit in flight each), a lane\'s next job only after its previous result is stored (lanes: 100 lanes in order; lane-free: 128 in flight; lane-free by HTTP: each create its own POST /tasks at concurrency 64 to a node:http process that stores a turn\'s creates as one acked message and then answers 201, bench/peers/floor-api.ts), a task row (spec as jsonb) and an execution row (request, response) per job in Postgres from the same read; no HTTP API, decision rules, leases, envelopes, traces or metrics; done = execution rows in status success.',
        `other processes on the machine used ${fmt.s(otherCpu)} of CPU over ${fmt.s(measuredWall)} of measured phases (${fmt.pct((100 * otherCpu) / Math.max(measuredWall, 1e-9))} of one core)${otherCpu / Math.max(measuredWall, 1e-9) > 0.1 ? ': the machine was shared with other work, figures are skewed' : ''}.`,
        ...(bullmq.skipped ? [`BullMQ skipped: ${bullmq.skipped}.`] : []),
      ],
    };
  },
};

function otherSeconds(report: CpuReport): number {
  return report.rows.find((r) => r.name === OTHERS)?.cpuSeconds ?? 0;
}
