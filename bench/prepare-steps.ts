/**
 * A rebuild's preparing thread, step by step, for builds side by side in one process,
 * without NATS or Postgres: the rebuild benchmark's store (`PREP_SHAPE`, default
 * commits) in memory, then per round and build (the order rotating): decode every
 * message, merge the events into batches as the preparing thread cuts them (40,000
 * events), and encode each batch's statements as it ships them (`toPortable`). Each
 * step timed by this thread's CPU clock and the process's (the difference: V8's helper
 * threads, mostly concurrent GC); medians printed.
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

function timed<T>(into: number[][], run: () => T): T {
  const [t0, p0] = clocks();
  const out = run();
  const [t1, p1] = clocks();
  into.push([(t1 - t0) / 1e6, (p1 - p0) / 1e6]);
  return out;
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
      const decoded = timed(r.decode, () => messages.map((m) => build.decodeEvents(m)));
      const batches = timed(r.apply, () => {
        const out = [new build.ProjectionBatch()];
        for (const events of decoded) {
          for (const e of events) build.applyEvent(out.at(-1), e);
          if (out.at(-1)!.size >= BATCH) out.push(new build.ProjectionBatch());
        }
        return out;
      });
      const bytes = timed(r.statements, () => batches.reduce((n, b) => n + build.toPortable(b.statements({ copyCreated: true })).transfer.reduce((m, x) => m + x.byteLength, 0), 0));
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
