/**
 * The JavaScript a job costs the worker process, step by step, with no I/O: the steps
 * the lanes benchmark runs per job (decode a create commit, eight partition owners
 * reading it, a result encoded into a commit and read back, the projector's rows and
 * statements, the notifier's decision), each timed by the process's own CPU clock over
 * 10,000 jobs of the shapes the service writes (100 lanes × 100, `bench/fixtures/`).
 * A shared machine moves wall time, much less a single thread's CPU time: rounds
 * interleave the steps and the median is printed.
 *
 *   node bench/worker-steps.ts [rounds]
 */
import { readFileSync } from 'node:fs';
import type { Kysely } from 'kysely';
import { compiler } from '../src/projections/portable-statements.ts';
import { OwnedTasks } from '../src/commands/partition/owned-tasks.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { commitMessage } from '../src/events/commit.ts';
import type { JetcronEvent } from '../src/events/types.ts';
import { decodeJson, encodeJson } from '../src/lib/json.ts';
import { decodeEvents } from '../src/nats/event-reader.ts';
import { applyEvent } from '../src/projections/apply-event.ts';
import { ProjectionBatch } from '../src/projections/batch.ts';
import { createNotifyDecider, notifyChainKey } from '../src/notifier/reader.ts';
import { cachedNotifyState, type SourceState } from '../src/notifier/state.ts';
import { createKeyedPipeline } from '../src/nats/keyed-pipeline.ts';

const LANES = 100;
const PER_LANE = 100;
const PARTITIONS = 8;
const RESULTS_PER_COMMIT = 20;
const PROJECTOR_BATCH = 500;

const fixture = JSON.parse(readFileSync(new URL('./fixtures/lane-job-events.json', import.meta.url), 'utf8')) as { created: TaskEvent; finished: ExecutionEvent };
const template = JSON.stringify(fixture.created);
const resultTemplate = JSON.stringify(fixture.finished);
const pad = (n: number, width = 6) => String(n).padStart(width, '0');

/** Every lane's batch as one create commit, the ids made unique as the service makes them. */
function createCommits(): Uint8Array[] {
  const out: Uint8Array[] = [];
  const { task, execution } = fixture.created.data as unknown as { task: { id: string; lane: string; name: string; url: string }; execution: { id: string } };
  for (let l = 0; l < LANES; l++) {
    const events: JetcronEvent[] = [];
    for (let i = 0; i < PER_LANE; i++) {
      const n = l * PER_LANE + i;
      const text = template
        .replaceAll(task.id, `${task.id.slice(0, -6)}${pad(n)}`)
        .replaceAll(execution.id, `${execution.id.slice(0, -6)}${pad(n)}`)
        .replaceAll(`"${task.lane}"`, `"lane-${l}"`)
        .replaceAll(task.name, `l${l}-${i}`);
      events.push(JSON.parse(text) as JetcronEvent);
    }
    out.push(encodeJson(commitMessage(`batch.${l}`, events)));
  }
  return out;
}

/** The result of `exec` as the attempt runner records it (the fixture's shape, this execution's ids). */
function resultOf(executionId: string, taskId: string, lane: string): ExecutionEvent {
  const f = fixture.finished.data as unknown as { execution_id: string; source: { id: string }; lane: string };
  return JSON.parse(resultTemplate.replaceAll(f.execution_id, executionId).replaceAll(f.source.id, taskId).replaceAll(`"${f.lane}"`, `"${lane}"`)) as ExecutionEvent;
}

const commits = createCommits();
// The statements compiled as the two-thread rebuild compiles them: no database.
const db: Kysely<unknown> = compiler;

interface Produced {
  creates: JetcronEvent[][];
  resultCommits: Uint8Array[];
}

function cpu<T>(fn: () => T): { ms: number; value: T } {
  const t0 = process.cpuUsage();
  const value = fn();
  const d = process.cpuUsage(t0);
  return { ms: (d.user + d.system) / 1000, value };
}

/** Decode each create commit once (the tap shares the decode among readers). */
const decodeCreates = (): JetcronEvent[][] => commits.map((c) => decodeEvents(c));

/** Eight owners read every create (each looks at all of them: its partition's it holds). */
function ownersRead(creates: JetcronEvent[][]): OwnedTasks[] {
  const states = Array.from({ length: PARTITIONS }, (_, p) => new OwnedTasks(p, PARTITIONS));
  creates.forEach((events, m) => {
    for (const state of states) events.forEach((e, i) => state.onTaskEvent(e as TaskEvent, m + 1, i));
  });
  return states;
}

/** The attempt runner's results, made before the clock runs (what they cost to build is the runner's). */
function resultsFor(creates: JetcronEvent[][]): Map<string, ExecutionEvent> {
  const out = new Map<string, ExecutionEvent>();
  for (const e of creates.flat() as TaskEvent[]) {
    const { task, execution } = e.data as unknown as { task: { id: string; lane: string }; execution: { id: string } };
    out.set(execution.id, resultOf(execution.id, task.id, task.lane));
  }
  return out;
}

/** Each owner runs its own to the end: takes, a result commit per 20 results encoded, read back and applied. */
function ownersRun(states: OwnedTasks[], results: Map<string, ExecutionEvent>): Uint8Array[] {
  const resultCommits: Uint8Array[] = [];
  let now = Date.now() + 60_000;
  for (let busy = true; busy; ) {
    busy = false;
    for (const state of states) {
      const taken = state.take(now);
      if (!taken.length) continue;
      busy = true;
      for (let i = 0; i < taken.length; i += RESULTS_PER_COMMIT) {
        const events = taken.slice(i, i + RESULTS_PER_COMMIT).map((x) => results.get(x.id)!);
        const bytes = encodeJson({ ...commitMessage(`c.${resultCommits.length}`, events), from: 1 });
        resultCommits.push(bytes);
        // Applied as written once stored (`record` in task-owner.ts), never decoded back.
        for (const e of events) state.onResult(e);
      }
    }
    now += 1;
  }
  return resultCommits;
}

function project(events: JetcronEvent[]): number {
  let statements = 0;
  for (let i = 0; i < events.length; i += PROJECTOR_BATCH) {
    const batch = new ProjectionBatch();
    for (const e of events.slice(i, i + PROJECTOR_BATCH)) applyEvent(batch, e);
    for (const s of batch.statements({ copyCreated: true })) {
      // Raw statements compile to SQL and parameters; a COPY's rows are encoded already.
      const raw = s as { compile?: (db: Kysely<unknown>) => unknown };
      raw.compile?.(db);
      statements++;
    }
  }
  return statements;
}

async function notify(events: JetcronEvent[]): Promise<void> {
  const states = new Map<string, SourceState>();
  const store = cachedNotifyState({
    get: async (o, s) => states.get(`${o}.${s}`) ?? null,
    put: async (o, s, st) => void states.set(`${o}.${s}`, st),
    forget: async (o, s) => void states.delete(`${o}.${s}`),
  });
  const decider = createNotifyDecider({ directory: { organization: async () => null } as never, clock: { now: () => Date.now() } as never, resolvers: {}, emailEnabled: false, log: () => {} }, store, async () => {});
  const pipeline = createKeyedPipeline({ maxInFlight: 2000, retryMs: 500, log: () => {} });
  let seq = 0;
  for (const event of events) {
    seq++;
    pipeline.hold(seq);
    // As the keyed reader runs it: decided at once when the source is idle and that says all.
    const item = { event, seq, subject: 's' };
    const key = notifyChainKey(event, 's');
    if (pipeline.idle(key) && decider.settle(item)) pipeline.pass(seq);
    else await pipeline.push(key, seq, () => decider.handle(item).then(() => true), () => false);
  }
  pipeline.release();
  await pipeline.drain();
}

const rounds = Number(process.argv[2] ?? 7);
const jobs = LANES * PER_LANE;
const steps: Record<string, number[]> = {};
const record = (name: string, ms: number) => (steps[name] ??= []).push((ms * 1000) / jobs);
let produced: Produced | undefined;
for (let r = 0; r < rounds; r++) {
  const d = cpu(decodeCreates);
  record('decode create commits', d.ms);
  const results = resultsFor(d.value);
  const read = cpu(() => ownersRead(d.value));
  record('8 owners read the creates', read.ms);
  const o = cpu(() => ownersRun(read.value, results));
  record('owners run: takes, result commits encoded, results applied', o.ms);
  produced = { creates: d.value, resultCommits: o.value };
  // The tap knows the owners' own commits by their bytes (`writingCommit`): a compare, not a decode.
  const received = produced.resultCommits.map((c) => Buffer.from(c));
  record('tap: result commits recognised as this process\'s own (byte compare)', cpu(() => received.every((c, i) => c.equals(produced!.resultCommits[i]!))).ms);
  const decodedResults = cpu(() => produced!.resultCommits.flatMap((c) => decodeEvents(c)));
  record('(for reference, not a step since 2026-11-26: decoding them, as the tap did)', decodedResults.ms);
  const all = [...d.value.flat(), ...decodedResults.value];
  record('projector: apply + statements, new rows by COPY (batches of 500)', cpu(() => project(all)).ms);
  const t0 = process.cpuUsage();
  await notify(all);
  const dn = process.cpuUsage(t0);
  record('notifier: keyed pipeline + decide', (dn.user + dn.system) / 1000);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const least = (xs: number[]) => Math.min(...xs);
console.log(`worker steps per job (µs of CPU: median, least of ${rounds} rounds, ${jobs.toLocaleString('en-US')} jobs; all rounds in brackets)`);
let total = 0;
for (const [name, xs] of Object.entries(steps)) {
  if (!name.startsWith('(')) total += median(xs);
  console.log(`${median(xs).toFixed(1).padStart(7)} ${least(xs).toFixed(1).padStart(6)}  ${name}  [${xs.map((x) => x.toFixed(1)).join(' ')}]`);
}
console.log(`${total.toFixed(1).padStart(7)}  total`);
void decodeJson;
