/**
 * What tracing costs: the dispatch-throughput run (10,000 immediate tasks at
 * concurrency 64) and create → target latency (immediate tasks at 200/s for 5 s),
 * each on a fresh stack with tracing off, on with every trace sampled, and on with
 * 1% sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio). The OTLP/HTTP endpoint is
 * a sink in the bench process that reads and counts what the exporter sends.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runDispatch } from './dispatch-throughput.ts';
import { sleep } from './harness.ts';
import { closedLoop, openLoop } from './load.ts';
import { troubleNotes, withStack, type Benchmark, type Stack } from './stack.ts';
import { fmt, summarize, type Summary } from './stats.ts';

const RATE = 200;
const SECONDS = 5;
const COUNT = RATE * SECONDS;
const WARMUP = 300;
const CONNECTIONS = 1024;

/** Accepts OTLP/HTTP exports and counts spans (JSON: the "spanId" keys). */
export async function startSink() {
  let requests = 0;
  let spans = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests++;
      bytes += body.length;
      spans += body.toString('latin1').split('"spanId"').length - 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts: () => ({ requests, spans, bytes }),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** Create → target arrival of immediate tasks at a steady rate (both CLOCK_MONOTONIC). */
export async function latencyRun(s: Stack): Promise<Summary> {
  const task = (id: string) => ({ url: `${s.target.url}/hit?id=${id}`, name: `trl-${id}`, retry_attempts: 0 });
  await closedLoop({ concurrency: 8, maxCount: WARMUP, maxMs: 30_000, fn: (i) => s.api.createTask(task(`w${i}`)) });
  await sleep(500);
  await s.target.reset();
  const api = s.client(CONNECTIONS);
  const sentHr = new Array<number>(COUNT);
  await openLoop({ rate: RATE, count: COUNT, maxMs: 30_000, fn: async (i) => (sentHr[i] = (await api.createTask(task(`L${i}`))).sentHr) });
  const deadline = Date.now() + 15_000;
  while ((await s.target.stats()).unique < COUNT && Date.now() < deadline) await sleep(100);
  const st = await s.target.stats(true);
  const ms: number[] = [];
  for (const [id, hr] of st.arrivals!) {
    if (!id.startsWith('L')) continue;
    const sent = sentHr[Number(id.slice(1))];
    if (sent !== undefined) ms.push(hr - sent);
  }
  return summarize(ms);
}

export interface TracingVariant {
  label: string;
  env: (sinkUrl: string) => Record<string, string>;
}

export const TRACING_VARIANTS: TracingVariant[] = [
  { label: 'tracing off', env: () => ({}) },
  { label: 'tracing on, 100% sampled', env: (url) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_TRACES_SAMPLER: 'parentbased_always_on' }) },
  { label: 'tracing on, 1% sampled', env: (url) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }) },
];

export const tracing: Benchmark = {
  name: 'tracing',
  title: `Tracing overhead: dispatch throughput (10,000 tasks) and create → target latency (${RATE}/s for ${SECONDS} s) with tracing off, on at 100% and at 1% sampling`,
  async run(ctx) {
    const sink = await startSink();
    try {
      const results: { label: string; rate: number; cpuMsPerTask: number; lat: Summary; spans: number; trouble: string[] }[] = [];
      for (const v of TRACING_VARIANTS) {
        ctx.log(`tracing: ${v.label}`);
        const before = sink.counts().spans;
        results.push(await withStack(ctx, `${this.name}-${results.length}`, async (s) => {
          const d = await runDispatch(s);
          const cpuMs = d.cpu.rows.filter((r) => !r.detail).reduce((t, r) => t + r.cpuSeconds, 0) * 1000;
          const lat = await latencyRun(s);
          await sleep(1500); // the batch processor exports every 500 ms
          return { label: v.label, rate: d.execRate, cpuMsPerTask: cpuMs / Math.max(1, d.finalSuccess), lat, spans: sink.counts().spans - before, trouble: troubleNotes(s.service) };
        }, { env: v.env(sink.url) }));
      }
      const off = results[0]!;
      return {
        name: this.name,
        title: this.title,
        metrics: results.flatMap((r) => [
          { label: `${r.label}: executions/s (fraction of off)`, value: `${fmt.rate(r.rate)} (${fmt.frac(r.rate / off.rate)})` },
          { label: `${r.label}: CPU per task, all processes`, value: fmt.ms(r.cpuMsPerTask) },
          { label: `${r.label}: create → target p50 / p99`, value: `${fmt.ms(r.lat.p50)} / ${fmt.ms(r.lat.p99)}` },
          { label: `${r.label}: spans exported`, value: fmt.int(r.spans) },
        ]),
        headline: results.slice(1).map((r) => ({
          label: `${r.label} vs off: throughput, p99`,
          value: `${fmt.frac(r.rate / off.rate)} of ${fmt.rate(off.rate)}; p99 ${fmt.ms(r.lat.p99)} vs ${fmt.ms(off.lat.p99)}`,
        })),
        tables: [],
        notes: [
          'each variant is a fresh stack (nats-server, database, target, jetcron serve); the runs follow one another, so drift of the machine between them shows as noise of a few percent.',
          'the OTLP/HTTP endpoint is a sink in the bench process (it reads each export and counts its spans); its CPU is the load generator\'s.',
          ...results.flatMap((r) => r.trouble),
        ],
      };
    } finally {
      await sink.close();
    }
  },
};
