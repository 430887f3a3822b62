/**
 * Create-to-target latency of immediate tasks at a steady, moderate rate: the
 * time from sending POST /api/v1/tasks to the target receiving the task's
 * request. Both ends use process.hrtime (CLOCK_MONOTONIC), so they compare.
 */
import { sleep } from './harness.ts';
import { closedLoop, openLoop } from './load.ts';
import { executionTimes, hrToWallOffset, stageTable, troubleNotes, waitForFinished, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize } from './stats.ts';

const RATE = 200;
const SECONDS = 10;
const COUNT = RATE * SECONDS;
const WARMUP = 300;
const GOAL_P50 = 5;
const GOAL_P99 = 25;
/** Enough that requests never wait for a connection in the client, even when answers are slow. */
const CONNECTIONS = 1024;

export const latency: Benchmark = {
  name: 'latency',
  title: `Create → target latency: immediate tasks at a steady ${RATE}/s for ${SECONDS} s`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const task = (id: string) => ({ url: `${s.target.url}/hit?id=${id}`, name: `lat-${id}`, retry_attempts: 0 });

      await closedLoop({ concurrency: 8, maxCount: WARMUP, maxMs: 30_000, fn: (i) => s.api.createTask(task(`w${i}`)) });
      const warmDeadline = Date.now() + 20_000;
      while ((await s.target.stats()).unique < WARMUP && Date.now() < warmDeadline) await sleep(100);
      await sleep(500);
      await s.target.reset();
      const api = s.client(CONNECTIONS);

      const sentHr = new Array<number>(COUNT);
      const answeredHr = new Array<number>(COUNT);
      const apiMs: number[] = [];
      const cpuEnd = s.startCpuPhase();
      const loop = await openLoop({
        rate: RATE,
        count: COUNT,
        maxMs: 30_000,
        fn: async (i) => {
          const r = await api.createTask(task(`L${i}`));
          sentHr[i] = r.sentHr;
          answeredHr[i] = r.sentHr + r.ms;
          if (r.status === 201) apiMs.push(r.ms);
        },
      });
      const deadline = Date.now() + 15_000;
      while ((await s.target.stats()).unique < COUNT && Date.now() < deadline) await sleep(100);
      const cpu = cpuEnd();
      const st = await s.target.stats(true);
      const projected = await waitForFinished(s.db, 'lat-L', st.unique, 15_000);

      const latencies: number[] = [];
      // By the second of the run each create was sent in: a stall shows as one slow second.
      const bySecond = Array.from({ length: SECONDS + 1 }, () => [] as number[]);
      let beforeAnswer = 0;
      const offset = hrToWallOffset();
      const times = await executionTimes(s.db, 'lat-L');
      const toDecision: number[] = [];
      const toDispatcher: number[] = [];
      const toTarget: number[] = [];
      const toAnswer: number[] = [];
      for (const [id, hr] of st.arrivals!) {
        if (!id.startsWith('L')) continue;
        const i = Number(id.slice(1));
        const sent = sentHr[i];
        if (sent === undefined) continue;
        latencies.push(hr - sent);
        bySecond[Math.min(SECONDS, Math.floor(i / RATE))]!.push(hr - sent);
        if (hr < answeredHr[i]!) beforeAnswer++;
        const t = times.get(`lat-${id}`);
        if (t) {
          toDecision.push(t.createdAt - (sent + offset));
          toAnswer.push(answeredHr[i]! + offset - t.createdAt);
          if (t.startedAt !== null) {
            toDispatcher.push(t.startedAt - t.createdAt);
            toTarget.push(hr + offset - t.startedAt);
          }
        }
      }
      const lat = summarize(latencies);
      const seconds = bySecond.map((xs, second) => ({ second, ...summarize(xs.length ? xs : [0]), n: xs.length })).filter((x) => x.n > 0);
      const slowest = seconds.reduce((a, b) => (b.max > a.max ? b : a), seconds[0]!);
      const answer = summarize(apiMs);
      const lag = summarize(loop.sendLagMs);
      const created = api.outcomes.count('201');
      const ok50 = lat.p50 <= GOAL_P50;
      const ok99 = lat.p99 <= GOAL_P99;
      const notes = [...api.outcomes.examples, ...troubleNotes(s.service)];
      if (latencies.length < created) notes.push(`MISSING: ${created - latencies.length} of ${created} created tasks never reached the target within 15 s after the last create.`);
      if (st.duplicates) notes.push(`target saw ${st.duplicates} duplicate deliveries.`);
      notes.push(`warm-up: ${WARMUP} tasks at concurrency 8 before the measured run; send lag = how late the open loop sent against its plan (bench-side).`);

      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'tasks created (201)', value: `${fmt.int(created)} of ${fmt.int(COUNT)}; outcomes ${api.outcomes.describe()}` },
          { label: 'reached the target', value: fmt.int(latencies.length) },
          { label: 'create → target p50', value: fmt.ms(lat.p50), goal: `≤ ${GOAL_P50} ms`, ok: ok50 },
          { label: 'create → target p90', value: fmt.ms(lat.p90) },
          { label: 'create → target p99', value: fmt.ms(lat.p99), goal: `≤ ${GOAL_P99} ms`, ok: ok99 },
          { label: 'create → target max', value: fmt.ms(lat.max) },
          { label: 'create → target min', value: fmt.ms(lat.min) },
          { label: 'slowest second of sends (by max): p50 / p99 / max', value: `second ${slowest.second}: ${fmt.ms(slowest.p50)} / ${fmt.ms(slowest.p99)} / ${fmt.ms(slowest.max)}; the other seconds' max ≤ ${fmt.ms(Math.max(0, ...seconds.filter((x) => x !== slowest).map((x) => x.max)))}` },
          { label: 'API answer (201) p50 / p99 / max', value: `${fmt.ms(answer.p50)} / ${fmt.ms(answer.p99)} / ${fmt.ms(answer.max)}` },
          { label: 'target reached before the 201 came back', value: `${fmt.int(beforeAnswer)} of ${fmt.int(latencies.length)}` },
          { label: 'send lag p99 / max (bench side)', value: `${fmt.ms(lag.p99)} / ${fmt.ms(lag.max)}` },
          { label: 'most requests queued in the client', value: `${fmt.int(api.maxQueued)} (${CONNECTIONS} connections)` },
          { label: 'results in Postgres after the last arrival', value: projected === undefined ? 'not all within 15 s' : `+${fmt.ms(projected)}` },
        ],
        headline: [
          { label: 'latency p50', value: fmt.ms(lat.p50), goal: `≤ ${GOAL_P50} ms`, ok: ok50 },
          { label: 'latency p99', value: fmt.ms(lat.p99), goal: `≤ ${GOAL_P99} ms`, ok: ok99 },
        ],
        tables: [{
          title: 'Where the time goes (service timestamps from Postgres: created_at = API decision, started_at = dispatcher start; ms resolution)',
          table: stageTable([
            { label: 'bench send → API decision (TaskCreated)', values: toDecision },
            { label: 'API decision → dispatcher start', values: toDispatcher },
            { label: 'dispatcher start → target arrival', values: toTarget },
            { label: 'total: send → target arrival', values: latencies },
            { label: 'API decision → 201 received (append + wait for the projection + read back)', values: toAnswer },
          ]),
        }],
        cpu: { phase: `${SECONDS} s at ${RATE}/s + wait for arrivals`, report: cpu, units: { count: COUNT, what: 'task' } },
        notes,
      };
    });
  },
};
