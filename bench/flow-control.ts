/**
 * Flow-control keys (issue 22), on one stack, runs interleaved over rounds:
 * - 10,000 immediate tasks with no key, the reference;
 * - the same 10,000 under one key with parallelism 64 (aim ≥ 0.9× the reference);
 * - the same 10,000 spread over 1,000 keys with parallelism 2 (aim ≥ 0.8×);
 * then a key with `rate: 500, period: "1s"`: the attempts' recorded starts per second
 * within 2% of 500 and never above it in any 1-second window.
 * Every run creates through single POST /api/v1/tasks at concurrency 64, so the runs
 * differ only by the key; each checks, from the attempts' recorded start and end, that
 * no key ever had more than its parallelism in flight.
 */
import { sleep } from './harness.ts';
import { closedLoop } from './load.ts';
import { runDispatch, type DispatchRun } from './dispatch-throughput.ts';
import { troubleNotes, withStack, type Benchmark, type Metric, type Stack } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';

const ROUNDS = 2;
const KEYS = 1_000;
const RATE = 500;
const RATE_TASKS = 4_000;
const RATE_CONCURRENCY = 64;

interface Shape {
  name: string;
  tag: string;
  parallelism: number | null;
  fields: (i: number) => Record<string, unknown>;
}

const SHAPES: Shape[] = [
  { name: 'no key', tag: 'n', parallelism: null, fields: () => ({}) },
  { name: 'one key, parallelism 64', tag: 'o', parallelism: 64, fields: () => ({ flow_control: { key: 'one', parallelism: 64 } }) },
  { name: `${KEYS.toLocaleString('en-US')} keys, parallelism 2`, tag: 'm', parallelism: 2, fields: (i) => ({ flow_control: { key: `k${i % KEYS}`, parallelism: 2 } }) },
];

/**
 * Every attempt's start and end: the rows of execution_attempts (attempts a retry
 * followed) and each ended execution's last attempt, which its own row holds.
 */
const ATTEMPTS = `(SELECT execution_id, started_at, finished_at FROM execution_attempts
  UNION SELECT id, started_at, finished_at FROM executions WHERE status IN ('success', 'failed', 'timeout') AND finished_at IS NOT NULL)`;

/** The most attempts of one key in flight at once, from the recorded intervals (ms resolution: an end and a start in the same ms do not overlap). */
async function maxInFlight(s: Stack, namePrefix: string, keyOf: (name: string) => string): Promise<number> {
  const r = await s.db.query<{ name: string; s: string; f: string }>(
    `SELECT e.source_name AS name, (extract(epoch from a.started_at) * 1000)::bigint AS s, (extract(epoch from a.finished_at) * 1000)::bigint AS f
     FROM ${ATTEMPTS} a JOIN executions e ON e.id = a.execution_id WHERE e.source_name LIKE $1`, [`${namePrefix}%`]);
  const byKey = new Map<string, Array<[number, number]>>();
  for (const row of r.rows) {
    const key = keyOf(row.name);
    let list = byKey.get(key);
    if (!list) byKey.set(key, (list = []));
    list.push([Number(row.s), 1], [Number(row.f), -1]);
  }
  let max = 0;
  for (const events of byKey.values()) {
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let open = 0;
    for (const [, d] of events) max = Math.max(max, (open += d));
  }
  return max;
}

/** Starts per second of the rate run, from the attempts' recorded `started_at`. */
async function rateRun(s: Stack) {
  const task = (i: number) => ({ url: `${s.target.url}/hit?id=rate${i}`, name: `fr-${i}`, retry_attempts: 0, flow_control: { key: 'paced', rate: RATE, period: '1s' } });
  await closedLoop({ concurrency: RATE_CONCURRENCY, maxCount: RATE_TASKS, maxMs: 120_000, fn: (i) => s.api.createTask(task(i)) });
  const deadline = Date.now() + 120_000;
  const done = async () => Number((await s.db.query<{ n: string }>("SELECT count(*) AS n FROM executions WHERE status = 'success' AND source_name LIKE 'fr-%'")).rows[0]?.n ?? 0);
  while ((await done()) < RATE_TASKS && Date.now() < deadline) await sleep(200);
  const r = await s.db.query<{ s: string }>(`SELECT (extract(epoch from a.started_at) * 1000)::bigint AS s FROM ${ATTEMPTS} a JOIN executions e ON e.id = a.execution_id WHERE e.source_name LIKE 'fr-%' ORDER BY 1`);
  const starts = r.rows.map((x) => Number(x.s));
  // The busiest window of 1 s: for each start, the starts in [t, t + 1000).
  let busiest = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (j < starts.length && starts[j]! < starts[i]! + 1000) j++;
    busiest = Math.max(busiest, j - i);
  }
  // The steady rate: whole seconds from the first start, the last (partial) one left out.
  const first = starts[0] ?? 0;
  const perSecond: number[] = [];
  for (const t of starts) {
    const k = Math.floor((t - first) / 1000);
    perSecond[k] = (perSecond[k] ?? 0) + 1;
  }
  const whole = perSecond.slice(0, -1).map((n) => n ?? 0);
  const mean = whole.length ? whole.reduce((a, b) => a + b, 0) / whole.length : NaN;
  return { starts: starts.length, busiest, mean, perSecond: whole };
}

export const flowControl: Benchmark = {
  name: 'flow-control',
  title: `flow-control keys: 10,000 tasks with no key, under one key (parallelism 64), over ${KEYS.toLocaleString('en-US')} keys (parallelism 2), ${ROUNDS} rounds interleaved; then a key with rate ${RATE}/1s`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const runs = new Map<string, DispatchRun[]>(SHAPES.map((sh) => [sh.name, []]));
      const peaks = new Map<string, number>(SHAPES.map((sh) => [sh.name, 0]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const shape of SHAPES) {
          ctx.log(`flow-control: round ${round + 1}, ${shape.name}`);
          const tag = `${shape.tag}${round}-`;
          runs.get(shape.name)!.push(await runDispatch(s, { tag, fields: shape.fields }));
          if (shape.parallelism !== null) {
            const keyOf = shape.tag === 'o' ? () => 'one' : (name: string) => `k${Number(name.slice(name.lastIndexOf('d') + 1)) % KEYS}`;
            peaks.set(shape.name, Math.max(peaks.get(shape.name)!, await maxInFlight(s, `dt-${tag}d`, keyOf)));
          }
        }
      }
      const median = (xs: number[]) => summarize(xs).p50;
      const rateOf = (name: string) => median(runs.get(name)!.map((r) => r.execRate));
      const reference = rateOf(SHAPES[0]!.name);
      const paced = await rateRun(s);
      const rateOk = paced.busiest <= RATE && Math.abs(paced.mean - RATE) / RATE <= 0.02;

      const metrics: Metric[] = SHAPES.flatMap((sh, n) => {
        const list = runs.get(sh.name)!;
        const rate = rateOf(sh.name);
        const goal = n === 1 ? 0.9 : n === 2 ? 0.8 : null;
        return [
          { label: `${sh.name}: executions/s per round (median)`, value: `${list.map((r) => fmt.rate(r.execRate)).join(', ')} (${fmt.rate(rate)})` },
          ...(goal === null ? [] : [
            { label: `${sh.name}: fraction of no key`, value: fmt.frac(rate / reference), goal: `≥ ${goal}×`, ok: rate / reference >= goal },
            { label: `${sh.name}: most of one key in flight at once (recorded attempts)`, value: `${peaks.get(sh.name)} (limit ${sh.parallelism})`, ok: peaks.get(sh.name)! <= sh.parallelism! },
          ]),
        ];
      });
      metrics.push(
        { label: `rate ${RATE}/1s: starts recorded`, value: fmt.int(paced.starts) },
        { label: `rate ${RATE}/1s: starts per whole second (mean)`, value: `${paced.mean.toFixed(1)} (${paced.perSecond.join(', ')})`, goal: `within 2% of ${RATE}`, ok: Math.abs(paced.mean - RATE) / RATE <= 0.02 },
        { label: `rate ${RATE}/1s: busiest 1-second window`, value: fmt.int(paced.busiest), goal: `≤ ${RATE}`, ok: paced.busiest <= RATE },
      );
      const table: Table = {
        headers: ['round', ...SHAPES.map((sh) => sh.name)],
        rows: Array.from({ length: ROUNDS }, (_, r) => [String(r + 1), ...SHAPES.map((sh) => fmt.rate(runs.get(sh.name)![r]!.execRate))]),
      };
      return {
        name: this.name,
        title: this.title,
        metrics,
        headline: [
          { label: 'one key p64 / no key', value: fmt.frac(rateOf(SHAPES[1]!.name) / reference), goal: '≥ 0.9×', ok: rateOf(SHAPES[1]!.name) / reference >= 0.9 },
          { label: `${KEYS} keys p2 / no key`, value: fmt.frac(rateOf(SHAPES[2]!.name) / reference), goal: '≥ 0.8×', ok: rateOf(SHAPES[2]!.name) / reference >= 0.8 },
          { label: `rate ${RATE}/1s: mean, busiest window`, value: `${paced.mean.toFixed(1)}, ${paced.busiest}`, ok: rateOk },
        ],
        tables: [{ title: 'Executions/s end to end, each run (first create → all success in Postgres)', table }],
        notes: [
          'each run: 300 warm-up tasks, then 10,000 created by single POST /api/v1/tasks at concurrency 64, timed until Postgres shows all as success (the dispatch-throughput run with a flow_control field added).',
          `keys: task i of the ${KEYS.toLocaleString('en-US')}-key run names key k(i mod ${KEYS}); the rate run creates ${RATE_TASKS.toLocaleString('en-US')} tasks under one key, its starts taken from the attempts' started_at (execution_attempts and the ended executions' own rows).`,
          ...troubleNotes(s.service),
        ],
      };
    });
  },
};
