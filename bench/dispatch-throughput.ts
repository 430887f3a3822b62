/**
 * Immediate tasks end to end: create N through the API as fast as 64 connections
 * allow, and time from the first create until Postgres shows all N executions
 * as success (polled every 50 ms), i.e. until the results are visible to users.
 */
import { hrMs, sleep, sampleTargetArrivals } from './harness.ts';
import { endToEnd, pollProgress, type EndToEndRun } from './progress.ts';
import { closedLoop } from './load.ts';
import { phaseActivity } from './pg-activity.ts';
import { countExecutions, executionStatuses, executionTimes, hrToWallOffset, stageTable, troubleNotes, withStack, type Benchmark, type Metric, type Stack } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';
import { signingCost } from './signing-cost.ts';

const TASKS = 10_000;
const CONCURRENCY = 64;
const WARMUP = 300;
const GOAL = 3_000;
const POLL_MS = 50;
const CREATE_MAX_MS = 120_000;
/** After creates end: give up when the success count has not moved for this long. */
const STALL_MS = 20_000;
const DRAIN_MAX_MS = 150_000;

/** What one measured dispatch run leaves for the report. */
export interface DispatchRun extends EndToEndRun<{ t: number; pg: number; created: number }> {
  /** Creates started. */
  started: number;
  /** Creates answered 201. */
  createdOk: number;
  createMs: number[];
  /** Success executions of the warm-up, before the clock started. */
  baseline: number;
  warmOutcomes: string;
}

/**
 * The measured part of the dispatch benchmark on a fresh stack: a warm-up of 300 tasks,
 * then 10,000 immediate tasks created at concurrency 64, until Postgres shows all as success
 * (or progress stalls, or the time bound). Also used by the peers benchmark.
 */
export async function runDispatch(s: Stack, opts: { tag?: string; fields?: (i: number) => Record<string, unknown> } = {}): Promise<DispatchRun> {
  const tag = opts.tag ?? '';
  const task = (id: string, i: number) => ({ url: `${s.target.url}/hit?id=${tag}${id}`, name: `dt-${tag}${id}`, body: { n: id }, retry_attempts: 0, ...opts.fields?.(i) });

  // Warm-up: JIT, connection pools, consumers; its executions are the baseline.
  const before = await countExecutions(s.db);
  await closedLoop({ concurrency: CONCURRENCY, maxCount: WARMUP, maxMs: 30_000, fn: (i) => s.api.createTask(task(`w${i}`, i)) });
  const warmDeadline = Date.now() + 30_000;
  let baseline = await countExecutions(s.db);
  while (baseline < before + WARMUP && Date.now() < warmDeadline) {
    await sleep(100);
    baseline = await countExecutions(s.db);
  }
  await s.target.reset();
  const warmOutcomes = s.api.outcomes.describe();
  s.api.outcomes.byKey.clear();

  // Samplers: Postgres success count every second, every 50 ms once the target has every request; target arrivals every 250 ms.
  let created = 0;
  const t0 = hrMs();
  const progress = pollProgress({
    t0,
    goal: TASKS,
    pollMs: POLL_MS,
    count: async () => (await countExecutions(s.db)) - baseline,
    sample: (t, pg) => ({ t, pg, created }),
    near: async () => (await s.target.stats()).unique >= TASKS,
  });
  const arrivals = sampleTargetArrivals(s.target, t0);

  const activityEnd = await phaseActivity(s.db, 'dispatch-throughput');
  const cpuEnd = s.startCpuPhase();
  const createMs: number[] = [];
  const load = await closedLoop({
    concurrency: CONCURRENCY,
    maxCount: TASKS,
    maxMs: CREATE_MAX_MS,
    fn: async (i) => {
      const r = await s.api.createTask(task(`d${i}`, i));
      created++;
      if (r.status === 201) createMs.push(r.ms);
    },
  });
  const createEnd = hrMs();
  const createdOk = s.api.outcomes.count('201');

  // Drain: until every created task's execution is success, or progress stalls, or the time bound.
  await progress.drain({ since: createEnd, enough: createdOk, stallMs: STALL_MS, maxMs: DRAIN_MAX_MS });
  const cpu = cpuEnd();
  await Promise.all([progress.stop(), arrivals.stop()]);
  const finalSuccess = (await countExecutions(s.db)) - baseline;
  await activityEnd(finalSuccess);
  return {
    ...endToEnd(progress, { finished: finalSuccess, createEnd, targetSamples: arrivals.samples, cpu }),
    started: load.started,
    createdOk,
    createMs,
    baseline,
    warmOutcomes,
  };
}

export const dispatchThroughput: Benchmark = {
  name: 'dispatch-throughput',
  title: `${TASKS.toLocaleString('en-US')} immediate tasks created through the API (concurrency ${CONCURRENCY}) until every execution is recorded as success`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const { t0, createEnd, pgCompleteAt, samples, targetSamples, cpu, started, createdOk, createMs, baseline, warmOutcomes, finalSuccess, e2eSeconds, execRate } = await runDispatch(s);
      const statuses = await executionStatuses(s.db);
      const st = await s.target.stats(true);
      const ours = st.arrivals!.filter(([id]) => id.startsWith('d'));
      const lastArrival = Math.max(...ours.map(([, hr]) => hr));
      const firstArrival = Math.min(...ours.map(([, hr]) => hr));

      const offset = hrToWallOffset();
      const times = await executionTimes(s.db, 'dt-d');
      const toDispatcher: number[] = [];
      const toTarget: number[] = [];
      const toFinished: number[] = [];
      for (const [id, hr] of ours) {
        const t = times.get(`dt-${id}`);
        if (t?.startedAt == null) continue;
        toDispatcher.push(t.startedAt - t.createdAt);
        toTarget.push(hr + offset - t.startedAt);
        if (t.finishedAt !== null) toFinished.push(t.finishedAt - t.startedAt);
      }

      // Aim 7: the executions list under concurrent readers, over the 10,000 just recorded.
      const reads = await listExecutions(s);

      const createSeconds = (createEnd - t0) / 1000;
      const createRate = createdOk / createSeconds;
      const toTargetSeconds = (lastArrival - t0) / 1000;
      const lat = summarize(createMs);
      const ok = pgCompleteAt !== undefined && execRate >= GOAL;
      const raw = ctx.rawRate;

      const metrics: Metric[] = [
        { label: 'tasks created (201)', value: `${fmt.int(createdOk)} of ${fmt.int(started)} sent` },
        { label: 'create outcomes', value: s.api.outcomes.describe() },
        { label: 'create phase', value: `${fmt.s(createSeconds)} → ${fmt.rate(createRate)}` },
        { label: 'create latency p50 / p99 / max', value: `${fmt.ms(lat.p50)} / ${fmt.ms(lat.p99)} / ${fmt.ms(lat.max)}` },
        { label: 'target received (distinct / duplicates)', value: `${fmt.int(ours.length)} / ${fmt.int(st.duplicates)}` },
        { label: 'first create → first target arrival', value: fmt.ms(firstArrival - t0) },
        { label: 'first create → last target arrival', value: `${fmt.s(toTargetSeconds)} → ${fmt.rate(ours.length / toTargetSeconds)}` },
        { label: 'last target arrival → all success in Postgres', value: pgCompleteAt ? fmt.ms(pgCompleteAt - lastArrival) : 'never (see statuses)' },
        { label: 'first create → all success in Postgres', value: pgCompleteAt ? fmt.s(e2eSeconds) : `not reached (${fmt.int(finalSuccess)} of ${fmt.int(createdOk)})` },
        { label: 'executions/s (end to end)', value: fmt.rate(execRate), goal: `≥ ${fmt.int(GOAL)}/s`, ok },
        { label: 'fraction of raw undici loop', value: raw ? fmt.frac(execRate / raw) : '–' },
        { label: 'create requests/s, fraction of raw', value: raw ? fmt.frac(createRate / raw) : '–' },
        { label: 'execution statuses in Postgres (incl. warm-up)', value: statuses },
        { label: `GET /executions?limit=100, concurrency ${READ_CONCURRENCY}, ${READ_MS / 1000} s: requests/s`, value: fmt.rate(reads.rate), goal: `≥ ${fmt.int(READ_GOAL)}/s`, ok: reads.rate >= READ_GOAL },
        { label: 'GET /executions?limit=100 p50 / p99 / max', value: `${fmt.ms(reads.lat.p50)} / ${fmt.ms(reads.lat.p99)} / ${fmt.ms(reads.lat.max)}`, goal: `p99 ≤ ${READ_P99_GOAL_MS} ms`, ok: reads.lat.p99 <= READ_P99_GOAL_MS },
        { label: 'GET /executions?limit=100 outcomes (100 rows each)', value: reads.outcomes },
        // Every request carries X-Jetcron-Signature and Standard Webhooks' signature: two HMACs instead of one.
        { label: 'signing per request (bench process, best of 5 × 20,000)', value: signingCost(JSON.stringify({ n: 'dt-0000000001' })).describe() },
      ];
      const notes = [
        `warm-up: ${WARMUP} tasks first (outcomes ${warmOutcomes}), ${baseline} success before the measured run; counts above exclude them.`,
        ...s.api.outcomes.examples,
        ...troubleNotes(s.service),
      ];
      if (finalSuccess < createdOk) notes.push(`LOST/UNFINISHED: ${createdOk - finalSuccess} created tasks have no success execution in Postgres at the end.`);
      if (ours.length < createdOk) notes.push(`target received only ${ours.length} of ${createdOk} created tasks' requests.`);

      return {
        name: this.name,
        title: this.title,
        metrics,
        headline: [
          { label: 'dispatch executions/s', value: fmt.rate(execRate), goal: `≥ ${fmt.int(GOAL)}/s`, ok },
          { label: 'dispatch create-phase requests/s', value: fmt.rate(createRate) },
          { label: `GET /executions?limit=100 (c${READ_CONCURRENCY}) requests/s, p99`, value: `${fmt.rate(reads.rate)}, ${fmt.ms(reads.lat.p99)}`, goal: `≥ ${fmt.int(READ_GOAL)}/s, p99 ≤ ${READ_P99_GOAL_MS} ms`, ok: reads.rate >= READ_GOAL && reads.lat.p99 <= READ_P99_GOAL_MS },
        ],
        tables: [
          { title: 'Progress (cumulative, since the first create)', table: timeline(samples, targetSamples) },
          {
            title: 'Per execution (service timestamps from Postgres; ms resolution)',
            table: stageTable([
              { label: 'API decision → dispatcher start', values: toDispatcher },
              { label: 'dispatcher start → target arrival', values: toTarget },
              { label: 'dispatcher start → attempt finished', values: toFinished },
            ]),
          },
        ],
        cpu: { phase: 'first create → all success (or give-up)', report: cpu, units: { count: createdOk, what: 'task' } },
        notes,
      };
    });
  },
};

const READ_CONCURRENCY = 16;
const READ_MS = 10_000;
const READ_GOAL = 1_000;
const READ_P99_GOAL_MS = 30;

/** Closed loop of `GET /api/v1/executions?limit=100` once the dispatch run is over: requests/s and latency; a page that is not 200 with 100 rows counts apart. */
export async function listExecutions(s: Stack, readMs = READ_MS) {
  const api = s.client(READ_CONCURRENCY);
  const ms: number[] = [];
  const outcomes = new Map<string, number>();
  const once = async () => {
    const r = await api.send('GET', '/api/v1/executions?limit=100');
    let key = String(r.status);
    if (r.status === 200 && (JSON.parse(r.text) as { data: unknown[] }).data.length !== 100) key = '200 short page';
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    if (key === '200') ms.push(r.ms);
  };
  await closedLoop({ concurrency: READ_CONCURRENCY, maxCount: 500, maxMs: 1000, fn: once });
  outcomes.clear();
  ms.length = 0;
  const run = await closedLoop({ concurrency: READ_CONCURRENCY, maxCount: 1_000_000, maxMs: readMs, fn: once });
  return { rate: ms.length / (run.elapsedMs / 1000), lat: summarize(ms), outcomes: [...outcomes].map(([k, v]) => `${k}×${v}`).join(', ') };
}

function timeline(samples: { t: number; pg: number; created: number }[], targetSamples: { t: number; n: number }[]): Table {
  const rows: string[][] = [];
  const end = samples.at(-1)?.t ?? 0;
  const step = end > 30_000 ? Math.ceil(end / 30_000) * 1000 : 1000;
  for (let t = step; t < end + step; t += step) {
    const at = [...samples].reverse().find((x) => x.t <= t) ?? samples[0];
    const tg = [...targetSamples].reverse().find((x) => x.t <= t);
    if (!at) break;
    rows.push([`${(Math.min(t, end) / 1000).toFixed(1)} s`, fmt.int(at.created), fmt.int(tg?.n ?? 0), fmt.int(at.pg)]);
  }
  return { headers: ['t', 'creates answered', 'target received', 'success in Postgres'], rows };
}
