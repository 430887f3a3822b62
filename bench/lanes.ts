/**
 * One-at-a-time lanes end to end: 100 lanes × 100 tasks, created as one
 * POST /api/v1/tasks/batch per lane (lanes interleaved by the concurrent creates),
 * timed from the first create until Postgres shows all 10,000 executions as success.
 *
 * The proof comes from the target: every task's URL carries `?lane=<n>&i=<index>`,
 * and the target records each request's arrival and the moment its 200 was written.
 * Within a lane the indices must arrive in increasing order (0, 1, … 99, no repeats)
 * and each arrival must come after the lane's previous request was answered.
 */
import { hrMs, sleep, sampleTargetArrivals } from './harness.ts';
import { closedLoop } from './load.ts';
import { endToEnd, pollProgress, type EndToEndRun } from './progress.ts';
import { phaseActivity } from './pg-activity.ts';
import { eventsLastSeq, executionStatuses, executionTimes, hrToWallOffset, stageTable, troubleNotes, withStack, type Benchmark, type Metric, type Stack } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';
import type { LaneRecord } from './target-server.ts';

const LANES = 100;
const PER_LANE = 100;
const TASKS = LANES * PER_LANE;
/** Batch creates in flight at once (one batch = one lane's 100 tasks). */
const CREATE_CONCURRENCY = 16;
const WARMUP_LANES = 4;
const WARMUP_PER_LANE = 25;
const POLL_MS = 50;
const CREATE_MAX_MS = 120_000;
/** After creates end: give up when the success count has not moved for this long. */
const STALL_MS = 20_000;
const DRAIN_MAX_MS = 240_000;

/** Executions of tasks whose name starts with `prefix`, by status. */
async function successCount(s: Stack, prefix: string): Promise<number> {
  const r = await s.db.query<{ n: string }>("SELECT count(*) AS n FROM executions WHERE status = 'success' AND source_name LIKE $1", [`${prefix}%`]);
  return Number(r.rows[0]?.n ?? 0);
}

async function statusesOf(s: Stack, prefix: string): Promise<string> {
  const r = await s.db.query<{ status: string; n: string }>(
    'SELECT status, count(*) AS n FROM executions WHERE source_name LIKE $1 GROUP BY status ORDER BY status',
    [`${prefix}%`],
  );
  return r.rows.map((x) => `${x.status}=${x.n}`).join(', ') || 'none';
}

export interface LaneCheck {
  lanesChecked: number;
  /** Lanes whose requests were exactly indices 0…n-1, once each. */
  lanesComplete: number;
  overlaps: number;
  outOfOrder: number;
  /** Of the out-of-order arrivals, those repeating an index already seen in the lane. */
  repeats: number;
  missing: number;
  /** Requests whose response was never written (still open when asked). */
  unanswered: number;
  /** Previous response written → next arrival, per hand-off within a lane (ms). */
  handoffMs: number[];
  /** First arrival → last response written, per lane (ms). */
  laneSpanMs: number[];
  examples: string[];
}

/** Checks the target's per-request records lane by lane (records in arrival order). */
export function checkLanes(records: LaneRecord[], lanes: string[], perLane: number): LaneCheck {
  const byLane = new Map<string, LaneRecord[]>(lanes.map((l) => [l, []]));
  const examples: string[] = [];
  const out: LaneCheck = { lanesChecked: 0, lanesComplete: 0, overlaps: 0, outOfOrder: 0, repeats: 0, missing: 0, unanswered: 0, handoffMs: [], laneSpanMs: [], examples };
  for (const r of records) {
    const list = byLane.get(r[0]);
    if (list) list.push(r);
    else if (examples.length < 8) examples.push(`request for an unexpected lane ${JSON.stringify(r[0])} (i=${r[1]})`);
  }
  for (const [lane, list] of byLane) {
    out.lanesChecked++;
    list.sort((a, b) => a[2] - b[2]);
    const seen = new Set<number>();
    for (let k = 0; k < list.length; k++) {
      const [, i, arrival, done] = list[k]!;
      if (done == null || !Number.isFinite(done)) out.unanswered++;
      if (k > 0) {
        const [, pi, , pdone] = list[k - 1]!;
        if (i <= pi) {
          out.outOfOrder++;
          if (seen.has(i)) out.repeats++;
          if (examples.length < 8) examples.push(`${lane}: i=${i} arrived after i=${pi}`);
        }
        if (pdone == null || !Number.isFinite(pdone) || arrival < pdone) {
          out.overlaps++;
          if (examples.length < 8) {
            const by = pdone == null || !Number.isFinite(pdone) ? 'before i=' + pi + ' was ever answered' : `${(pdone - arrival).toFixed(3)} ms before i=${pi} was answered`;
            examples.push(`${lane}: i=${i} arrived ${by}`);
          }
        } else {
          out.handoffMs.push(arrival - pdone);
        }
      }
      seen.add(i);
    }
    let complete = list.length === perLane;
    for (let i = 0; i < perLane; i++) {
      if (!seen.has(i)) {
        out.missing++;
        complete = false;
      }
    }
    if (complete) out.lanesComplete++;
    const last = list.at(-1);
    if (list.length && last && Number.isFinite(last[3])) out.laneSpanMs.push(last[3] - list[0]![2]);
  }
  return out;
}

/** What one measured lanes run leaves for the report. */
export interface LanesRun extends EndToEndRun<{ t: number; pg: number; batches: number }> {
  batchMs: number[];
  outcomes: Map<string, number>;
  failures: string[];
  tasksAccepted: number;
  /** EVENTS messages stored from the first create to the last success. */
  eventsMessages: number;
  answeredHr: number[];
  laneNames: string[];
  warm: { status: string[]; done: number; check: LaneCheck };
}

/**
 * The measured part of the lanes benchmark on a fresh stack: a warm-up of a few small lanes,
 * then 100 lanes × 100 tasks created one batch per lane, until Postgres shows all as success
 * (or progress stalls, or the time bound). Also used by the peers benchmark.
 */
export async function runLanes(s: Stack): Promise<LanesRun> {
  const client = s.client(CREATE_CONCURRENCY);
  const batchBody = (lane: string, tag: string, n: number) =>
    JSON.stringify({
      lane,
      retry_attempts: 0,
      tasks: Array.from({ length: n }, (_, i) => ({ url: `${s.target.url}/hit?lane=${encodeURIComponent(lane)}&i=${i}&id=${tag}-${i}`, name: `${tag}-${i}` })),
    });
  const post = (body: string) => client.send('POST', '/api/v1/tasks/batch', { body });

  // Warm-up: a few small lanes through the same path (JIT, pools, consumers, lane KV).
  const warmBodies = Array.from({ length: WARMUP_LANES }, (_, n) => batchBody(`warm-${n}`, `lw${n}`, WARMUP_PER_LANE));
  const warmStatus: string[] = [];
  await closedLoop({ concurrency: WARMUP_LANES, maxCount: WARMUP_LANES, maxMs: 30_000, fn: async (n) => warmStatus.push(String((await post(warmBodies[n]!)).status)) });
  const warmDeadline = Date.now() + 60_000;
  let warmDone = await successCount(s, 'lw');
  while (warmDone < WARMUP_LANES * WARMUP_PER_LANE && Date.now() < warmDeadline) {
    await sleep(100);
    warmDone = await successCount(s, 'lw');
  }
  const warmRecords = await s.target.lanes();
  const warmCheck = checkLanes(warmRecords, Array.from({ length: WARMUP_LANES }, (_, n) => `warm-${n}`), WARMUP_PER_LANE);
  await s.target.reset();

  // Bodies built before the clock starts; lanes named lane-0 … lane-99, created in that order.
  const laneNames = Array.from({ length: LANES }, (_, n) => `lane-${n}`);
  const bodies = laneNames.map((lane, n) => batchBody(lane, `ln${n}`, PER_LANE));

  let batchesAnswered = 0;
  const t0 = hrMs();
  const progress = pollProgress({
    t0, goal: TASKS, pollMs: POLL_MS, count: () => successCount(s, 'ln'), sample: (t, pg) => ({ t, pg, batches: batchesAnswered }),
    near: async () => (await s.target.stats()).unique >= TASKS,
  });
  const arrivals = sampleTargetArrivals(s.target, t0);

  const seqBefore = await eventsLastSeq(s);
  const activityEnd = await phaseActivity(s.db, 'lanes');
  const cpuEnd = s.startCpuPhase();
  const batchMs: number[] = [];
  const outcomes = new Map<string, number>();
  const failures: string[] = [];
  let tasksAccepted = 0;
  const answeredHr = new Array<number>(LANES).fill(NaN);
  await closedLoop({
    concurrency: CREATE_CONCURRENCY,
    maxCount: LANES,
    maxMs: CREATE_MAX_MS,
    fn: async (n) => {
      const r = await post(bodies[n]!);
      batchesAnswered++;
      answeredHr[n] = r.sentHr + r.ms;
      outcomes.set(String(r.status), (outcomes.get(String(r.status)) ?? 0) + 1);
      if (r.status === 201) {
        batchMs.push(r.ms);
        const created = (JSON.parse(r.text) as { data?: { created?: number } }).data?.created ?? 0;
        tasksAccepted += created;
        if (created !== PER_LANE && failures.length < 5) failures.push(`lane-${n}: 201 but created=${created}`);
      } else if (failures.length < 5) {
        failures.push(`lane-${n}: ${r.status} ${r.text.slice(0, 300)}`);
      }
    },
  });
  const createEnd = hrMs();

  // Drain: until every accepted task's execution is success, or progress stalls, or the time bound.
  await progress.drain({ since: createEnd, enough: tasksAccepted, stallMs: STALL_MS, maxMs: DRAIN_MAX_MS });
  const cpu = cpuEnd();
  const eventsMessages = (await eventsLastSeq(s)) - seqBefore;
  await Promise.all([progress.stop(), arrivals.stop()]);
  // Let any response still being written land before asking for the records.
  await sleep(200);

  const finalSuccess = await successCount(s, 'ln');
  await activityEnd(finalSuccess);
  return {
    ...endToEnd(progress, { finished: finalSuccess, createEnd, targetSamples: arrivals.samples, cpu }),
    batchMs,
    outcomes,
    failures,
    tasksAccepted,
    eventsMessages,
    answeredHr,
    laneNames,
    warm: { status: warmStatus, done: warmDone, check: warmCheck },
  };
}

export const lanes: Benchmark = {
  name: 'lanes',
  title: `${LANES} lanes × ${PER_LANE} tasks (${TASKS.toLocaleString('en-US')}), one POST /api/v1/tasks/batch per lane (concurrency ${CREATE_CONCURRENCY}), until every execution is success; lane order and no overlap checked at the target`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const { t0, createEnd, pgCompleteAt, samples, targetSamples, cpu, batchMs, outcomes, failures, tasksAccepted, eventsMessages, answeredHr, laneNames, warm, finalSuccess, e2eSeconds, execRate } = await runLanes(s);
      const statuses = await statusesOf(s, 'ln');
      const allStatuses = await executionStatuses(s.db);
      const execRows = await s.db.query<{ n: string; d: string }>("SELECT count(*) AS n, count(DISTINCT source_id) AS d FROM executions WHERE source_name LIKE 'ln%'");
      const st = await s.target.stats();
      const records = await s.target.lanes();
      const check = checkLanes(records, laneNames, PER_LANE);
      const split = handoffSplit(records, await executionTimes(s.db, 'ln'), hrToWallOffset(), createEnd);
      const laneStartMs: number[] = [];
      for (const r of records) {
        const n = Number(r[0].slice('lane-'.length));
        if (r[1] === 0 && Number.isFinite(answeredHr[n])) laneStartMs.push(r[2] - answeredHr[n]!);
      }
      const firstArrival = records.length ? Math.min(...records.map((r) => r[2])) : NaN;
      const lastArrival = records.length ? Math.max(...records.map((r) => r[2])) : NaN;

      const createSeconds = (createEnd - t0) / 1000;
      const raw = ctx.rawRate;
      const bm = summarize(batchMs);
      const proof = `lanes checked: ${check.lanesChecked}, overlaps: ${check.overlaps}, out of order: ${check.outOfOrder}`;
      const proofOk = check.lanesChecked === LANES && check.overlaps === 0 && check.outOfOrder === 0 && check.missing === 0 && check.unanswered === 0;
      const complete = pgCompleteAt !== undefined;
      const outcomeText = [...outcomes].map(([k, v]) => `${k}×${v}`).join(', ') || 'none';

      const metrics: Metric[] = [
        { label: 'batches answered (status × count)', value: outcomeText },
        { label: 'tasks accepted', value: `${fmt.int(tasksAccepted)} of ${fmt.int(TASKS)}` },
        { label: 'create phase (all batches answered)', value: `${fmt.s(createSeconds)} → ${fmt.rate(tasksAccepted / createSeconds)} tasks` },
        { label: 'batch (100 tasks) accept latency p50 / p99 / max', value: `${fmt.ms(bm.p50)} / ${fmt.ms(bm.p99)} / ${fmt.ms(bm.max)}` },
        { label: 'target requests (lane records / distinct ids / duplicates)', value: `${fmt.int(records.length)} / ${fmt.int(st.unique)} / ${fmt.int(st.duplicates)}` },
        { label: 'first create → first target arrival', value: fmt.ms(firstArrival - t0) },
        { label: 'first create → last target arrival', value: fmt.s((lastArrival - t0) / 1000) },
        { label: 'last target arrival → all success in Postgres', value: pgCompleteAt ? fmt.ms(pgCompleteAt - lastArrival) : 'never (see statuses)' },
        { label: 'first create → all success in Postgres', value: complete ? fmt.s(e2eSeconds) : `not reached (${fmt.int(finalSuccess)} of ${fmt.int(tasksAccepted)})` },
        { label: 'executions/s (end to end)', value: fmt.rate(execRate) },
        { label: 'EVENTS messages stored over the run (per execution)', value: `${fmt.int(eventsMessages)} (${(eventsMessages / Math.max(1, finalSuccess)).toFixed(3)})` },
        { label: 'fraction of raw undici loop', value: raw ? fmt.frac(execRate / raw) : '–' },
        { label: 'lane check (target records)', value: proof, ok: proofOk },
        { label: 'lanes complete (indices 0…99 once each)', value: `${check.lanesComplete} of ${LANES}; missing ${check.missing}, repeats ${check.repeats}, unanswered ${check.unanswered}` },
        { label: 'executions in Postgres (rows / distinct tasks)', value: `${fmt.int(Number(execRows.rows[0]?.n ?? 0))} / ${fmt.int(Number(execRows.rows[0]?.d ?? 0))}` },
        { label: 'execution statuses (measured lanes)', value: statuses },
        { label: 'execution statuses (all, incl. warm-up)', value: allStatuses },
      ];
      const notes = [
        `creates: one POST /api/v1/tasks/batch per lane ({lane, retry_attempts: 0, tasks: [{url, name}…]}), ${CREATE_CONCURRENCY} in flight, lanes requested in order lane-0 … lane-99; batches were used rather than single POST /api/v1/tasks (lane per task) because they are faster to create.`,
        `proof: the target records each request's lane and index (URL query), its arrival (process.hrtime) and when its 200 was written (response 'finish'); per lane, arrivals sorted by time must have strictly increasing indices, and each arrival must be later than the previous request's response.`,
        `warm-up: ${WARMUP_LANES} lanes × ${WARMUP_PER_LANE} tasks first (batches ${warm.status.join(', ')}; ${warm.done} success; lanes checked: ${warm.check.lanesChecked}, overlaps: ${warm.check.overlaps}, out of order: ${warm.check.outOfOrder}, missing: ${warm.check.missing}); counts above exclude them.`,
        `a lane runs one request at a time, so at most ${LANES} requests are ever in flight; the raw loop runs 64 in parallel with no service between.`,
        ...failures,
        ...check.examples.map((e) => `lane violation: ${e}`),
        ...troubleNotes(s.service),
      ];
      if (finalSuccess < tasksAccepted) notes.push(`LOST/UNFINISHED: ${tasksAccepted - finalSuccess} accepted tasks have no success execution in Postgres at the end (${statuses}).`);

      return {
        name: this.name,
        title: this.title,
        metrics,
        headline: [
          { label: 'lanes executions/s', value: fmt.rate(execRate) },
          { label: 'lanes check', value: proof, ok: proofOk },
        ],
        tables: [
          { title: 'Progress (cumulative, since the first create)', table: timeline(samples, targetSamples) },
          {
            title: 'Within a lane (target timestamps, process.hrtime)',
            table: stageTable([
              { label: "batch answered → lane's first arrival (i=0)", values: laneStartMs },
              { label: 'previous response written → next arrival', values: check.handoffMs },
              { label: '  of which while batches were still being created', values: split.duringCreates },
              { label: '  of which after the last batch was answered', values: split.afterCreates },
              { label: 'lane span: first arrival → last response', values: check.laneSpanMs },
            ]),
          },
          {
            title: 'Hand-off within a lane, split by the service timestamps in Postgres (ms resolution)',
            table: stageTable([
              { label: 'prev response written → prev attempt finished_at', values: split.toFinished },
              { label: 'prev finished_at → next started_at (release, advance, dispatch)', values: split.finishedToStarted },
              { label: 'next started_at → next target arrival', values: split.startedToArrival },
            ]),
          },
        ],
        cpu: { phase: 'first create → all success (or give-up)', report: cpu, units: { count: finalSuccess, what: 'execution' } },
        notes,
      };
    });
  },
};

/**
 * Each hand-off (request i-1 answered → request i arrives, same lane) split at the
 * service's own timestamps: the previous attempt's finished_at and the next one's
 * started_at. Also the hand-offs grouped by whether the creates were still running.
 */
function handoffSplit(records: LaneRecord[], times: Map<string, { startedAt: number | null; finishedAt: number | null }>, hrToWall: number, createEndHr: number) {
  const out = { toFinished: [] as number[], finishedToStarted: [] as number[], startedToArrival: [] as number[], duringCreates: [] as number[], afterCreates: [] as number[] };
  const byKey = new Map<string, LaneRecord>();
  for (const r of records) if (!byKey.has(`${r[0]}#${r[1]}`)) byKey.set(`${r[0]}#${r[1]}`, r);
  for (const cur of byKey.values()) {
    const [lane, i] = [cur[0], cur[1]];
    if (i === 0) continue;
    const prev = byKey.get(`${lane}#${i - 1}`);
    if (!prev || prev[3] == null || !Number.isFinite(prev[3])) continue;
    (prev[3] < createEndHr ? out.duringCreates : out.afterCreates).push(cur[2] - prev[3]);
    const n = lane.slice('lane-'.length);
    const tp = times.get(`ln${n}-${i - 1}`);
    const tc = times.get(`ln${n}-${i}`);
    if (tp?.finishedAt == null || tc?.startedAt == null) continue;
    out.toFinished.push(tp.finishedAt - (prev[3] + hrToWall));
    out.finishedToStarted.push(tc.startedAt - tp.finishedAt);
    out.startedToArrival.push(cur[2] + hrToWall - tc.startedAt);
  }
  return out;
}

function timeline(samples: { t: number; pg: number; batches: number }[], targetSamples: { t: number; n: number }[]): Table {
  const rows: string[][] = [];
  const end = samples.at(-1)?.t ?? 0;
  const step = end > 30_000 ? Math.ceil(end / 30_000) * 1000 : 1000;
  for (let t = step; t < end + step; t += step) {
    const at = [...samples].reverse().find((x) => x.t <= t) ?? samples[0];
    const tg = [...targetSamples].reverse().find((x) => x.t <= t);
    if (!at) break;
    rows.push([`${(Math.min(t, end) / 1000).toFixed(1)} s`, fmt.int(at.batches), fmt.int(tg?.n ?? 0), fmt.int(at.pg)]);
  }
  return { headers: ['t', 'batches answered', 'target received', 'success in Postgres'], rows };
}
