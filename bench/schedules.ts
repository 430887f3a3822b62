/**
 * Cron schedules at scale, two shapes: `schedules`, 10,000 schedules with 6-field crons,
 * schedule i firing once a minute at second i % 60; `schedules-every-second` (issue 35's
 * aim: tick lateness p99 ≤ 20 ms), 1,000 schedules each firing every second. Each calls
 * the target with `?sched=<i>`; then ~70 s of ticks. Lateness = arrival (wall clock) −
 * the whole second the cron names. CPU per tick sits beside a task's in the same run.
 */
import { request } from 'undici';
import { sleep, type Target } from './harness.ts';
import { closedLoop, Outcomes } from './load.ts';
import { troubleNotes, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';

const CONCURRENCY = 64;
const WINDOW_MS = 70_000;
/** After the window, wait this long for late ticks of the window's seconds. */
const TAIL_MS = 15_000;
const CREATE_LIMIT_MS = 240_000;

const wallMs = (): number => performance.timeOrigin + performance.now();

/** Seconds of the raw burst reference. */
const RAW_BURST_SECONDS = 10;

/**
 * The floor of "n requests due at one instant" on this machine: this process fires n
 * GETs at the target at each whole second for 10 s, all at once, nothing recorded or
 * decided. Its arrival lateness is what no scheduler sending from one process beats.
 */
async function rawBurst(target: Target, n: number): Promise<{ lateness: number[]; failed: number }> {
  await target.reset();
  const first = Math.ceil((wallMs() + 500) / 1000) * 1000;
  let failed = 0;
  for (let k = 0; k < RAW_BURST_SECONDS; k++) {
    await sleep(Math.max(0, first + k * 1000 - wallMs()));
    const sends: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      sends.push(request(`${target.url}/tick?sched=${i}`).then((r) => r.body.dump(), () => void failed++));
    }
    await Promise.all(sends);
  }
  const lateness = (await target.scheds()).map(([, wall]) => wall - Math.floor(wall / 1000) * 1000);
  await target.reset();
  return { lateness, failed };
}

/** `count` schedules; schedule i fires at the seconds s with s % periodS === i % periodS (periodS divides 60). */
function cronOf(i: number, periodS: number): string {
  if (periodS === 1) return '* * * * * *';
  if (periodS === 60) return `${i % 60} * * * * *`;
  return `${i % periodS}/${periodS} * * * * *`;
}

export const schedules: Benchmark = scheduleTicks('schedules', 10_000, 60, 'each once a minute');
export const schedulesEverySecond: Benchmark = scheduleTicks('schedules-every-second', 1_000, 1, 'each every second');

function scheduleTicks(name: string, SCHEDULES: number, periodS: number, what: string): Benchmark {
  const periodMs = periodS * 1000;
  // An arrival this close before a tick is that tick's, early.
  const earlyWithinMs = Math.min(5_000, periodMs / 10);
  return {
  name,
  title: `Cron ticks: ${SCHEDULES.toLocaleString('en-US')} schedules "${cronOf(0, periodS).replace(/^0/, '<i % 60>')}" (${what}), ${WINDOW_MS / 1000} s of ticks`,
  run(ctx) {
    return withStack(
      ctx,
      this.name,
      async (s) => {
        // Every schedule due at once (every second): the floor of a burst, measured first, on the same target.
        const raw = periodS === 1 ? await rawBurst(s.target, SCHEDULES) : null;
        const rawL = raw ? summarize(raw.lateness) : null;
        const creates = new Outcomes();
        const createMs: number[] = [];
        const c0 = wallMs();
        const load = await closedLoop({
          concurrency: CONCURRENCY,
          maxCount: SCHEDULES,
          maxMs: CREATE_LIMIT_MS,
          fn: async (i) => {
            const r = await s.api.send('POST', '/api/v1/schedules', {
              body: JSON.stringify({ url: `${s.target.url}/tick?sched=${i}`, cron: cronOf(i, periodS), name: `sc-${i}`, retry_attempts: 0 }),
            });
            creates.add(String(r.status), r.status === 201 ? undefined : r.text);
            createMs.push(r.ms);
          },
        });
        const createSeconds = (wallMs() - c0) / 1000;
        const created = creates.count('201');
        ctx.log(`schedules: ${created} created in ${createSeconds.toFixed(1)} s`);

        // The window starts at the next whole second, at least 2 s after the last create.
        const windowStart = Math.ceil((wallMs() + 2_000) / 1000) * 1000;
        const windowEnd = windowStart + WINDOW_MS;
        await sleep(Math.max(0, windowStart - 1_000 - wallMs()));
        await s.target.reset();
        await sleep(Math.max(0, windowStart - wallMs()));
        const cpuEnd = s.startCpuPhase();
        await sleep(Math.max(0, windowEnd - wallMs()));
        const cpu = cpuEnd();
        await sleep(TAIL_MS);
        const records = await s.target.scheds();

        // Expected ticks: for each whole second of the window, the created schedules naming it.
        const perSecondOfPeriod = new Array<number>(periodS).fill(0);
        for (let i = 0; i < load.started; i++) perSecondOfPeriod[i % periodS]!++;
        const createdShare = load.started ? created / load.started : 0;
        let expected = 0;
        for (let t = windowStart; t < windowEnd; t += 1000) expected += perSecondOfPeriod[(t / 1000) % periodS]!;
        expected = Math.round(expected * createdShare);

        const lateness: number[] = [];
        const seen = new Map<string, number>();
        let outside = 0;
        let early = 0;
        const perSecond: number[][] = Array.from({ length: WINDOW_MS / 1000 }, () => []);
        for (const [i, wall] of records) {
          // The intended tick: the latest instant ≤ arrival whose second of the period is
          // i % period (or the next one when the arrival is just before it: an early tick).
          const sec = Math.floor(wall / 1000);
          let tick = (sec - (((sec % periodS) - (i % periodS) + periodS) % periodS)) * 1000;
          if (wall - tick > periodMs - earlyWithinMs) tick += periodMs;
          if (tick < windowStart || tick >= windowEnd) {
            outside++;
            continue;
          }
          const late = wall - tick;
          if (late < 0) early++;
          lateness.push(late);
          const key = `${i}@${tick}`;
          seen.set(key, (seen.get(key) ?? 0) + 1);
          perSecond[(tick - windowStart) / 1000]!.push(late);
        }
        let duplicates = 0;
        for (const n of seen.values()) if (n > 1) duplicates += n - 1;
        const distinct = seen.size;
        const l = summarize(lateness);
        const c = summarize(createMs);
        const svc = cpuRows(cpu);

        // Per 10 s of the window: ticks and lateness.
        const byTen: Table = {
          headers: ['tick second of window', 'ticks', 'p50', 'p99', 'max'],
          rows: Array.from({ length: WINDOW_MS / 10_000 }, (_, k) => {
            const x = summarize(perSecond.slice(k * 10, k * 10 + 10).flat());
            return [`${k * 10}–${k * 10 + 10} s`, fmt.int(x.n), fmt.ms(x.p50), fmt.ms(x.p99), fmt.ms(x.max)];
          }),
        };
        const notes = [
          `creates at concurrency ${CONCURRENCY} through POST /api/v1/schedules (one request per schedule, Pro org); schedules already tick during the create phase, those ticks are not counted.`,
          `the window is [${new Date(windowStart).toISOString().slice(11, 19)}, ${new Date(windowEnd).toISOString().slice(11, 19)}) UTC; arrivals up to ${TAIL_MS / 1000} s after it still count for the window's seconds; ${fmt.int(outside)} arrivals belonged to ticks outside the window.`,
          ...creates.examples,
          ...troubleNotes(s.service),
        ];
        if (distinct < expected) notes.push(`MISSING: ${fmt.int(expected - distinct)} of ${fmt.int(expected)} expected ticks never arrived (within ${TAIL_MS / 1000} s after the window).`);
        return {
          name,
          title: this.title,
          metrics: [
            { label: 'schedules created (201)', value: `${fmt.int(created)} of ${fmt.int(load.started)} sent; outcomes ${creates.describe()}` },
            { label: 'create phase', value: `${fmt.s(createSeconds)} (${fmt.rate(created / createSeconds)}); create latency p50 ${fmt.ms(c.p50)}, p99 ${fmt.ms(c.p99)}` },
            { label: 'ticks expected in the window', value: fmt.int(expected) },
            { label: 'ticks received (distinct schedule × tick)', value: `${fmt.int(distinct)} (${fmt.rate(distinct / (WINDOW_MS / 1000))}, ≈ ${fmt.int((distinct / WINDOW_MS) * 60_000)} per minute)` },
            { label: 'duplicates (same schedule twice in one tick)', value: fmt.int(duplicates), goal: '0', ok: duplicates === 0 },
            { label: 'lateness p50', value: fmt.ms(l.p50) },
            { label: 'lateness p90', value: fmt.ms(l.p90) },
            { label: 'lateness p99', value: fmt.ms(l.p99) },
            { label: 'lateness max', value: fmt.ms(l.max) },
            { label: 'lateness min (negative = early)', value: `${fmt.ms(l.min)} (${early} early)` },
            { label: 'jetcron service CPU during the window', value: svc },
            ...(raw && rawL ? [{ label: `reference: ${SCHEDULES} raw undici GETs fired at each whole second for ${RAW_BURST_SECONDS} s, arrival lateness p50 / p99 / max`, value: `${fmt.ms(rawL.p50)} / ${fmt.ms(rawL.p99)} / ${fmt.ms(rawL.max)} (${fmt.int(rawL.n)} arrived, ${raw.failed} failed)` }] : []),
          ],
          headline: [
            { label: 'ticks received / expected', value: `${fmt.int(distinct)} / ${fmt.int(expected)}`, ok: distinct >= expected },
            { label: 'tick duplicates', value: fmt.int(duplicates), goal: '0', ok: duplicates === 0 },
            { label: 'tick lateness p50 / p99 / max', value: `${fmt.ms(l.p50)} / ${fmt.ms(l.p99)} / ${fmt.ms(l.max)}` },
            ...(rawL ? [{ label: 'the raw burst floor p50 / p99 / max', value: `${fmt.ms(rawL.p50)} / ${fmt.ms(rawL.p99)} / ${fmt.ms(rawL.max)}` }] : []),
          ],
          tables: [{ title: 'Ticks and lateness by 10 s of the window', table: byTen }],
          cpu: { phase: 'the tick window', report: cpu, units: { count: distinct, what: 'tick' } },
          notes,
        };
      },
      { plan: 'pro' },
    );
  },
  };
}

function cpuRows(cpu: { rows: { name: string; pctOfCore: number; detail?: boolean }[] }): string {
  const i = cpu.rows.findIndex((r) => r.name.startsWith('jetcron'));
  if (i === -1) return '–';
  const main = cpu.rows[i + 1]?.detail ? `, main thread ${fmt.pct(cpu.rows[i + 1]!.pctOfCore)}` : '';
  return `${fmt.pct(cpu.rows[i]!.pctOfCore)} of one core${main}`;
}
