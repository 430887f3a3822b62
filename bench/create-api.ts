/**
 * The task create API at saturation: 64 connections for 10 s. Tasks are due in
 * 24 h, so only the write path runs (validate, the create in its loop turn's commit,
 * the position announced for read-your-writes; the partition owner holds its timer in
 * memory and the projector commits its row, neither awaited by the answer).
 */
import { closedLoop } from './load.ts';
import { troubleNotes, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize } from './stats.ts';

const CONCURRENCY = 64;
const SECONDS = 10;
const WARMUP_MS = 1_000;
const MAX_REQUESTS = 500_000;

export const createApi: Benchmark = {
  name: 'create-api',
  title: `POST /api/v1/tasks at saturation: concurrency ${CONCURRENCY} for ${SECONDS} s, run_at 24 h ahead`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const runAt = new Date(Date.now() + 86_400_000).toISOString();
      const task = (i: number) => ({ url: `${s.target.url}/hit?id=c${i}`, name: `create-${i}`, run_at: runAt, body: { i } });

      await closedLoop({ concurrency: CONCURRENCY, maxCount: MAX_REQUESTS, maxMs: WARMUP_MS, fn: (i) => s.api.createTask(task(-i - 1)) });
      const warm = s.api.outcomes.describe();
      s.api.outcomes.byKey.clear();

      const ms: number[] = [];
      const cpuEnd = s.startCpuPhase();
      const run = await closedLoop({
        concurrency: CONCURRENCY,
        maxCount: MAX_REQUESTS,
        maxMs: SECONDS * 1000,
        fn: async (i) => {
          const r = await s.api.createTask(task(i));
          if (r.status === 201) ms.push(r.ms);
        },
      });
      const cpu = cpuEnd();
      const ok = s.api.outcomes.count('201');
      const rate = ok / (run.elapsedMs / 1000);
      const lat = summarize(ms);
      const raw = ctx.rawRate;
      const arrived = (await s.target.stats()).count;
      const notes = [`warm-up: ${WARMUP_MS / 1000} s at the same concurrency first (${warm}).`, ...s.api.outcomes.examples, ...troubleNotes(s.service)];
      if (arrived) notes.push(`target received ${arrived} requests although every task is due in 24 h.`);
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'requests', value: `${fmt.int(run.started)} sent in ${fmt.s(run.elapsedMs / 1000)}; outcomes ${s.api.outcomes.describe()}` },
          { label: 'throughput (201 only)', value: fmt.rate(rate) },
          { label: 'fraction of raw undici loop', value: raw ? fmt.frac(rate / raw) : '–' },
          { label: 'latency p50', value: fmt.ms(lat.p50) },
          { label: 'latency p90', value: fmt.ms(lat.p90) },
          { label: 'latency p99', value: fmt.ms(lat.p99) },
          { label: 'latency max', value: fmt.ms(lat.max) },
        ],
        headline: [
          { label: 'create API requests/s', value: fmt.rate(rate) },
          { label: 'create API p50 / p99', value: `${fmt.ms(lat.p50)} / ${fmt.ms(lat.p99)}` },
        ],
        tables: [],
        cpu: { phase: `${SECONDS} s measured`, report: cpu, units: { count: run.started, what: 'request' } },
        notes,
      };
    });
  },
};
