/**
 * Timer accuracy: tasks whose run_at values are spread evenly over a 10 s window
 * that starts after all of them have been created; lateness = arrival at the
 * target (wall clock) − run_at.
 */
import { hrMs, sleep } from './harness.ts';
import { closedLoop } from './load.ts';
import { executionTimes, stageTable, troubleNotes, waitForFinished, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize, type Table } from './stats.ts';

const TASKS = 5_000;
const WINDOW_MS = 10_000;
const CONCURRENCY = 64;
const PROBE = 400;
const GOAL_P99 = 50;
const WAIT_AFTER_WINDOW_MS = 30_000;

const wallMs = (): number => performance.timeOrigin + performance.now();

export const timers: Benchmark = {
  name: 'timers',
  title: `Timer lateness: ${TASKS.toLocaleString('en-US')} tasks with run_at spread evenly over ${WINDOW_MS / 1000} s, all created beforehand`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const task = (id: string, runAt: number) => ({
        url: `${s.target.url}/hit?id=${id}`,
        name: `tm-${id}`,
        run_at: new Date(runAt).toISOString(),
        retry_attempts: 0,
      });

      // Probe the create rate (tasks due tomorrow) to know how far ahead the window must start.
      // The first half warms the service up; the second half is timed.
      const probeAt = Date.now() + 86_400_000;
      await closedLoop({ concurrency: CONCURRENCY, maxCount: PROBE / 2, maxMs: 30_000, fn: (i) => s.api.createTask(task(`p${i}`, probeAt)) });
      const probe = await closedLoop({ concurrency: CONCURRENCY, maxCount: PROBE / 2, maxMs: 30_000, fn: (i) => s.api.createTask(task(`q${i}`, probeAt)) });
      const probeRate = probe.started / (probe.elapsedMs / 1000);
      const leadMs = Math.min(90_000, Math.max(5_000, Math.round(((1.3 * TASKS) / probeRate) * 1000) + 2_000));
      await s.target.reset();
      s.api.outcomes.byKey.clear();

      const start = Math.ceil(Date.now() + leadMs);
      const step = WINDOW_MS / TASKS;
      const runAt = Array.from({ length: TASKS }, (_, i) => start + Math.round(i * step));
      const c0 = hrMs();
      const load = await closedLoop({ concurrency: CONCURRENCY, maxCount: TASKS, maxMs: leadMs - 500, fn: (i) => s.api.createTask(task(`T${i}`, runAt[i]!)) });
      const createdSeconds = (hrMs() - c0) / 1000;
      const slackMs = start - wallMs();
      const created = s.api.outcomes.count('201');

      // Measure CPU over the firing window only.
      if (slackMs > 0) await sleep(slackMs);
      const cpuEnd = s.startCpuPhase();
      const deadline = start + WINDOW_MS + WAIT_AFTER_WINDOW_MS;
      for (;;) {
        const n = (await s.target.stats()).unique;
        if (n >= created || Date.now() > deadline) break;
        await sleep(Date.now() < start + WINDOW_MS ? 500 : 100);
      }
      const cpu = cpuEnd();
      const st = await s.target.stats(true);
      const projected = await waitForFinished(s.db, 'tm-T', st.unique, 15_000);

      const times = await executionTimes(s.db, 'tm-T');
      const toDispatcher: number[] = [];
      const toTarget: number[] = [];
      const lateness: number[] = [];
      const perSecond: number[][] = Array.from({ length: Math.ceil(WINDOW_MS / 1000) }, () => []);
      for (const [id, , wall] of st.arrivals!) {
        if (!id.startsWith('T')) continue;
        const i = Number(id.slice(1));
        const due = runAt[i];
        if (due === undefined) continue;
        const late = wall - due;
        lateness.push(late);
        const t = times.get(`tm-${id}`);
        if (t?.startedAt != null) {
          toDispatcher.push(t.startedAt - due);
          toTarget.push(wall - t.startedAt);
        }
        perSecond[Math.min(perSecond.length - 1, Math.floor((due - start) / 1000))]!.push(late);
      }
      const l = summarize(lateness);
      const early = lateness.filter((x) => x < 0).length;
      const ok = l.p99 <= GOAL_P99 && lateness.length === created;
      const notes = [
        `the ${PROBE} probe tasks (${fmt.rate(probeRate)}) are due in 24 h and never fire; the window started ${fmt.s(leadMs / 1000)} after the probe.`,
        ...s.api.outcomes.examples,
        ...troubleNotes(s.service),
      ];
      if (slackMs < 0) notes.push(`WARNING: creating took longer than the lead time; the window started ${fmt.ms(-slackMs)} before the last create.`);
      if (lateness.length < created) notes.push(`MISSING: ${created - lateness.length} of ${created} timers had not fired ${WAIT_AFTER_WINDOW_MS / 1000} s after the window ended.`);
      if (st.duplicates) notes.push(`target saw ${st.duplicates} duplicate deliveries.`);

      const byBucket: Table = {
        headers: ['run_at second', 'fired', 'p50', 'p99', 'max'],
        rows: perSecond.map((v, k) => {
          const x = summarize(v);
          return [`${k}–${k + 1} s`, fmt.int(x.n), fmt.ms(x.p50), fmt.ms(x.p99), fmt.ms(x.max)];
        }),
      };
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'tasks created (201)', value: `${fmt.int(created)} of ${fmt.int(load.started)} sent; outcomes ${s.api.outcomes.describe()}` },
          { label: 'create phase', value: `${fmt.s(createdSeconds)} (${fmt.rate(created / createdSeconds)}); slack before the window ${fmt.s(slackMs / 1000)}` },
          { label: 'fired (reached the target)', value: fmt.int(lateness.length) },
          { label: 'lateness p50', value: fmt.ms(l.p50) },
          { label: 'lateness p90', value: fmt.ms(l.p90) },
          { label: 'lateness p99', value: fmt.ms(l.p99), goal: `≤ ${GOAL_P99} ms`, ok },
          { label: 'lateness max', value: fmt.ms(l.max) },
          { label: 'lateness min (negative = early)', value: `${fmt.ms(l.min)} (${early} early)` },
          { label: 'results in Postgres after the last arrival', value: projected === undefined ? 'not all within 15 s' : `+${fmt.ms(projected)}` },
        ],
        headline: [
          { label: 'timer lateness p50', value: fmt.ms(l.p50) },
          { label: 'timer lateness p99', value: fmt.ms(l.p99), goal: `≤ ${GOAL_P99} ms`, ok },
        ],
        tables: [
          { title: 'Lateness by run_at second of the window', table: byBucket },
          {
            title: 'Where the time goes (started_at = dispatcher start, from Postgres; ms resolution)',
            table: stageTable([
              { label: 'run_at → dispatcher start (timer fire + DISPATCH)', values: toDispatcher },
              { label: 'dispatcher start → target arrival', values: toTarget },
              { label: 'total: run_at → target arrival', values: lateness },
            ]),
          },
        ],
        cpu: { phase: 'the firing window until all arrived', report: cpu, units: { count: lateness.length, what: 'timer fired' } },
        notes,
      };
    });
  },
};
