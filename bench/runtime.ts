/**
 * Node 24 against the machine's older system Node, in one run: the dispatch-throughput
 * run (10,000 immediate tasks at concurrency 64) and create → target latency (200/s for
 * 5 s), with tracing off and on (every trace sampled), the service started on each
 * runtime in turn. Rounds interleave the runtimes so the machine's drift falls on both.
 * The bench process itself and the target stay on Node 24; only the service changes.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { runDispatch } from './dispatch-throughput.ts';
import { sleep } from './harness.ts';
import { troubleNotes, withStack, type Benchmark, type Metric } from './stack.ts';
import { fmt, type Summary } from './stats.ts';
import { latencyRun, startSink, TRACING_VARIANTS } from './tracing.ts';

const ROUNDS = 2;
const SYSTEM_NODES = ['/usr/bin/node', '/usr/local/bin/node'];

interface Runtime {
  label: string;
  node: string;
  env: Record<string, string>;
}

function runtimes(): Runtime[] {
  const own: Runtime = { label: `Node ${process.versions.node}`, node: process.execPath, env: {} };
  const other = SYSTEM_NODES.filter(existsSync)
    .map((node) => ({ node, version: execFileSync(node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim() }))
    .find((n) => n.version.split('.')[0] !== process.versions.node.split('.')[0]);
  // JETCRON_SYSTEM_NODE keeps bin/jetcron.mjs from moving itself onto Node 24.
  return other ? [{ label: `Node ${other.version}`, node: other.node, env: { JETCRON_SYSTEM_NODE: '1' } }, own] : [own];
}

interface Row {
  rate: number;
  cpuMsPerTask: number;
  lat: Summary;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export const runtime: Benchmark = {
  name: 'runtime',
  title: 'Node 24 against the system Node: dispatch throughput (10,000 tasks) and create → target latency (200/s), tracing off and on',
  async run(ctx) {
    const list = runtimes();
    const variants = TRACING_VARIANTS.slice(0, 2);
    const sink = await startSink();
    const rows = new Map<string, Row[]>();
    const trouble: string[] = [];
    let stacks = 0;
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        for (const rt of list) {
          for (const v of variants) {
            const key = `${rt.label}, ${v.label}`;
            ctx.log(`runtime: round ${round}, ${key}`);
            const row = await withStack(ctx, `${this.name}-${stacks++}`, async (s) => {
              const d = await runDispatch(s);
              const cpuMs = d.cpu.rows.filter((r) => !r.detail).reduce((t, r) => t + r.cpuSeconds, 0) * 1000;
              const lat = await latencyRun(s);
              await sleep(600); // the span batch processor exports every 500 ms
              trouble.push(...troubleNotes(s.service));
              return { rate: d.execRate, cpuMsPerTask: cpuMs / Math.max(1, d.finalSuccess), lat };
            }, { env: { ...rt.env, ...v.env(sink.url) }, node: rt.node });
            rows.set(key, [...(rows.get(key) ?? []), row]);
          }
        }
      }
    } finally {
      await sink.close();
    }
    const summary = [...rows].map(([key, rs]) => ({
      key,
      rate: median(rs.map((r) => r.rate)),
      cpu: median(rs.map((r) => r.cpuMsPerTask)),
      p50: median(rs.map((r) => r.lat.p50)),
      p99: median(rs.map((r) => r.lat.p99)),
      rounds: rs.map((r) => fmt.rate(r.rate)).join(', '),
    }));
    const metrics: Metric[] = summary.flatMap((r) => [
      { label: `${r.key}: executions/s (median; rounds)`, value: `${fmt.rate(r.rate)} (${r.rounds})` },
      { label: `${r.key}: CPU per task, all processes`, value: fmt.ms(r.cpu) },
      { label: `${r.key}: create → target p50 / p99`, value: `${fmt.ms(r.p50)} / ${fmt.ms(r.p99)}` },
    ]);
    const headline: Metric[] = [];
    if (list.length === 2) {
      for (const v of variants) {
        const [old, now] = list.map((rt) => summary.find((r) => r.key === `${rt.label}, ${v.label}`)!);
        headline.push({
          label: `${v.label}: ${list[1]!.label} / ${list[0]!.label}`,
          value: `throughput ${fmt.frac(now!.rate / old!.rate)}; CPU per task ${fmt.ms(now!.cpu)} vs ${fmt.ms(old!.cpu)}; p99 ${fmt.ms(now!.p99)} vs ${fmt.ms(old!.p99)}`,
        });
      }
      const on = (rt: Runtime) => summary.find((r) => r.key === `${rt.label}, ${variants[1]!.label}`)!.rate / summary.find((r) => r.key === `${rt.label}, ${variants[0]!.label}`)!.rate;
      headline.push({ label: 'tracing on / off, per runtime', value: list.map((rt) => `${rt.label} ${fmt.frac(on(rt))}`).join('; ') });
    }
    return {
      name: this.name,
      title: this.title,
      metrics,
      headline,
      tables: [],
      notes: [
        list.length === 2 ? `runtimes: ${list.map((rt) => `${rt.label} (${rt.node})`).join(', ')}; ${ROUNDS} rounds, the runtimes interleaved, medians shown` : 'no system Node of another major was found: only the project\'s Node ran',
        ...trouble,
      ],
    };
  },
};
