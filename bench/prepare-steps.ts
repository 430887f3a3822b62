/**
 * A rebuild's preparing thread, step by step, for builds side by side in one process,
 * without NATS or Postgres: the rebuild benchmark's store (`PREP_SHAPE`, default
 * commits) in memory, then per round and build (the order rotating) as the preparing
 * thread goes: decode the messages, merge their events into a batch, and at 40,000
 * events encode its statements (`toPortable`) and drop it. Each step's CPU summed
 * over the run, by this thread's clock and the process's (the difference: V8's helper
 * threads, mostly concurrent GC); medians over rounds printed. Node flags for the
 * process (`--max-semi-space-size=…`) compare GC settings.
 *
 *   node bench/prepare-steps.ts base=../old new=. [rounds]
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { storeMessages, type StoreShape } from './rebuild.ts';

interface Build {
  label: string;
  decodeEvents(data: Uint8Array): { type: string }[];
  applyEvent(batch: unknown, e: unknown): void;
  ProjectionBatch: new () => { size: number; statements(o: { copyCreated: boolean }): unknown[] };
  toPortable(s: unknown[]): { statements: unknown[]; transfer: ArrayBuffer[] };
}

const BATCH = 40_000;
/** Messages decoded, then applied, at a time (a clock read per step each time). */
const CHUNK = 200;
const args = process.argv.slice(2);
const rounds = Number(args.find((a) => /^\d+$/.test(a)) ?? 5);

async function load(label: string, dir: string): Promise<Build> {
  const at = (file: string) => import(pathToFileURL(path.resolve(dir, 'src', file)).href);
  const [reader, apply, batch, portable] = await Promise.all([at('nats/event-reader.ts'), at('projections/apply-event.ts'), at('projections/batch.ts'), at('projections/portable-statements.ts')]);
  return { label, decodeEvents: reader.decodeEvents, applyEvent: apply.applyEvent, ProjectionBatch: batch.ProjectionBatch, toPortable: portable.toPortable };
}

function clocks(): [number, number] {
  return [process.threadCpuUsage().user + process.threadCpuUsage().system, process.cpuUsage().user + process.cpuUsage().system];
}

async function main() {
  const builds = await Promise.all(args.filter((a) => a.includes('=')).map((a) => load(...(a.split('=') as [string, string]))));
  const messages = await storeMessages((process.env.PREP_SHAPE ?? 'commits') as StoreShape);
  console.log(`${messages.length} messages, ${(messages.reduce((n, m) => n + m.length, 0) / 1e6).toFixed(1)} MB`);
  const results = new Map(builds.map((b) => [b.label, { decode: [] as number[][], apply: [] as number[][], statements: [] as number[][], bytes: 0 }]));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < builds.length; i++) {
      const build = builds[(i + round) % builds.length]!;
      const r = results.get(build.label)!;
      // As the preparing thread goes: a batch at a time, each dropped once encoded (its heap stays one batch).
      const steps: [number, number][] = [[0, 0], [0, 0], [0, 0]];
      let batch = new build.ProjectionBatch();
      let bytes = 0;
      const step = (k: number, run: () => void) => {
        const [t0, p0] = clocks();
        run();
        const [t1, p1] = clocks();
        steps[k]![0] += (t1 - t0) / 1e6;
        steps[k]![1] += (p1 - p0) / 1e6;
      };
      const ship = () => step(2, () => {
        bytes += build.toPortable(batch.statements({ copyCreated: true })).transfer.reduce((m, x) => m + x.byteLength, 0);
        batch = new build.ProjectionBatch();
      });
      for (let at = 0; at < messages.length; at += CHUNK) {
        let decoded: { type: string }[][] = [];
        step(0, () => (decoded = messages.slice(at, at + CHUNK).map((m) => build.decodeEvents(m))));
        step(1, () => decoded.forEach((events) => events.forEach((e) => build.applyEvent(batch, e))));
        if (batch.size >= BATCH) ship();
      }
      if (batch.size) ship();
      r.decode.push(steps[0]!);
      r.apply.push(steps[1]!);
      r.statements.push(steps[2]!);
      r.bytes = bytes;
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const cell = (xs: number[][]) => `${median(xs.map((x) => x[0]!)).toFixed(2)} / ${median(xs.map((x) => x[1]!)).toFixed(2)}`;
  console.log(`| build | decode | apply | statements | COPY bytes | rounds (statements, thread CPU s) |`);
  console.log('|---|---|---|---|---|---|');
  for (const [label, r] of results) {
    console.log(`| ${label} | ${cell(r.decode)} | ${cell(r.apply)} | ${cell(r.statements)} | ${(r.bytes / 1e6).toFixed(1)} MB | ${r.statements.map((x) => x[0]!.toFixed(2)).join(', ')} |`);
  }
  console.log('(CPU s, median over rounds: this thread / the process)');
}

await main();
