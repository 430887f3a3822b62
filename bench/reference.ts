/** The ceiling: a raw undici request loop against the same target server, no jetcron involved. */
import { request } from 'undici';
import { cpuPhase, startTarget, type CpuReport, type Target } from './harness.ts';
import { closedLoop, Outcomes } from './load.ts';
import type { Benchmark } from './stack.ts';
import { fmt, summarize } from './stats.ts';

const CONCURRENCY = 64;
const REQUESTS = 20_000;
const WARMUP = 2_000;

export interface RawLoopRun {
  /** Completed requests per second over the measured loop. */
  rate: number;
  latencies: number[];
  outcomes: Outcomes;
  elapsedMs: number;
  /** Requests the target counted in the measured loop. */
  received: number;
  /** Target and load generator over the measured loop. */
  cpu: CpuReport;
}

/** POST to the target at concurrency 64: a warm-up of 2,000, then `requests` measured. */
export async function rawLoop(target: Target, requests: number): Promise<RawLoopRun> {
  const outcomes = new Outcomes();
  const latencies: number[] = [];
  const body = JSON.stringify({ hello: 'world' });
  const headers = { 'content-type': 'application/json' };
  const one = async (record: boolean) => {
    const t = performance.now();
    try {
      const res = await request(`${target.url}/hit`, { method: 'POST', headers, body });
      await res.body.dump();
      outcomes.add(String(res.statusCode));
    } catch (err) {
      outcomes.add((err as { code?: string }).code ?? 'error', (err as Error).message);
    }
    if (record) latencies.push(performance.now() - t);
  };
  await closedLoop({ concurrency: CONCURRENCY, maxCount: WARMUP, maxMs: 30_000, fn: () => one(false) });
  await target.reset();
  const cpuEnd = cpuPhase([
    { name: 'target server (node)', pid: () => target.pid, withDescendants: true },
    { name: 'bench load generator (node)', pid: () => process.pid, withDescendants: false },
  ]);
  const run = await closedLoop({ concurrency: CONCURRENCY, maxCount: requests, maxMs: 60_000, fn: () => one(true) });
  const cpu = cpuEnd();
  const received = (await target.stats()).count;
  return { rate: latencies.length / (run.elapsedMs / 1000), latencies, outcomes, elapsedMs: run.elapsedMs, received, cpu };
}

export const reference: Benchmark = {
  name: 'reference',
  title: `Raw undici loop: POST to the target server, concurrency ${CONCURRENCY}, ${REQUESTS.toLocaleString('en-US')} requests`,
  async run(ctx) {
    const target = await startTarget();
    try {
      const { rate, latencies, outcomes, elapsedMs, received, cpu } = await rawLoop(target, REQUESTS);
      ctx.rawRate = rate;
      const lat = summarize(latencies);
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'requests completed', value: fmt.int(latencies.length) },
          { label: 'received by the target', value: fmt.int(received) },
          { label: 'elapsed', value: fmt.s(elapsedMs / 1000) },
          { label: 'throughput', value: fmt.rate(rate) },
          { label: 'latency p50 / p99 / max', value: `${fmt.ms(lat.p50)} / ${fmt.ms(lat.p99)} / ${fmt.ms(lat.max)}` },
          { label: 'outcomes', value: outcomes.describe() },
        ],
        headline: [{ label: 'raw undici loop', value: fmt.rate(rate) }],
        tables: [],
        cpu: { phase: 'measured loop', report: cpu, units: { count: latencies.length, what: 'request' } },
        notes: outcomes.examples,
      };
    } finally {
      await target.stop();
    }
  },
};
