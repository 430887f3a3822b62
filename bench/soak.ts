/**
 * Soak: N executions (default 1,000,000; `JETCRON_SOAK_TASKS` overrides) through one
 * `jetcron serve` process (every role, `JETCRON_PROCESSES=1`). Lane-free immediate tasks
 * are created through `POST /api/v1/tasks` by a closed loop at concurrency 64, held back
 * so that at most 20,000 created tasks have not yet reached the target: the service is
 * measured in a steady state, not by a backlog growing with N. At checkpoints (every 5%
 * of N, and at 100k, 200k, 500k and 1M) it records the service's and nats-server's RSS
 * (each the median of the last 5 samples, taken every 200 ms), the service's V8 heap,
 * nats-server's Go heap (GODEBUG=gctrace=1), every stream's size, the nats store on disk
 * and the Postgres sizes; then one verdict per quantity against a reference checkpoint
 * taken once EVENTS' duplicate window is full: flat, or growing with the log as each
 * stream's retention says (EVENTS is kept forever). At the end
 * it checks that every created task reached the target and that Postgres shows N
 * executions `success`.
 *
 * Opt-in (`npm run bench -- soak`): not part of the default run, it takes ~10 minutes at 1M.
 */
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { defaultNatsMemoryLimit } from '../src/runtime/nats-memory-limit.ts';
import { STREAMS } from '../streams/definitions.ts';
import { freePort, hrMs, onCleanup, RESULTS_DIR, sleep } from './harness.ts';
import { closedLoop } from './load.ts';
import { countExecutions, executionStatuses, troubleNotes, withStack, type BenchContext, type BenchResult, type Benchmark, type Metric, type Stack } from './stack.ts';
import { fmt, type Table } from './stats.ts';

const DEFAULT_TASKS = 1_000_000;
const CONCURRENCY = 64;
/** Creates started minus distinct requests at the target: the feed waits at this many. */
const MAX_OUTSTANDING = 20_000;
/** How often the target's received count is read (IPC, O(1)): drives the bound and the checkpoints. */
const POLL_MS = 250;
/** Flat: the last checkpoint at most this much above the reference checkpoint. */
const FLAT_FACTOR = 1.25;
/** RSS flat, issue 21's aim 9: within 10% from the reference to the end. */
const RSS_FLAT_FACTOR = 1.1;
/** The earliest reference checkpoint, when N goes well past it (issue 21's aim 9 says "from 200k"). */
const REFERENCE_AT = 200_000;
/** Checkpoints taken whenever N reaches them, besides every 5% of N. */
const FIXED_MARKS = [100_000, 200_000, 500_000, 1_000_000];
/** RSS is sampled this often; a checkpoint's RSS is the median of the last RSS_SAMPLES samples. */
const RSS_SAMPLE_MS = 200;
const RSS_SAMPLES = 5;
/** A checkpoint's recent rate is over this long: nats-server's heap follows the rate of the moment. */
const RECENT_RATE_MS = 10_000;
/** GCs of nats-server whose live heap a checkpoint takes the median of. */
const GO_GCS = 5;
/** Bounds: the whole run stops at 30 min (run.ts); 1M at ~1,800/s takes ~9–10 min. */
const CREATE_MAX_MS = 22 * 60_000;
const DRAIN_MAX_MS = 3 * 60_000;
const STALL_MS = 30_000;
/** The feed stops early when the machine has less memory available than this (/proc/meminfo MemAvailable). */
const MIN_AVAILABLE_BYTES = 1024 * 2 ** 20;
/**
 * The duplicate window of the stream the tasks write (EVENTS): nats-server
 * holds each msg id of it in memory, legitimately growing until the run is that old. The
 * reference checkpoint comes after it, plus a margin for the purge timer's period.
 */
const DEDUPE_WINDOW_MS = STREAMS.events.duplicate_window / 1e6;
const WINDOW_FULL_MS = DEDUPE_WINDOW_MS + 10_000;

function soakTasks(): number {
  const raw = process.env.JETCRON_SOAK_TASKS;
  if (raw === undefined || raw.trim() === '') return DEFAULT_TASKS;
  const n = Number(raw.replace(/_/g, ''));
  if (!Number.isInteger(n) || n < 100) throw new Error(`JETCRON_SOAK_TASKS=${raw}: give a whole number ≥ 100`);
  return n;
}

/**
 * JETCRON_SOAK_RATE: creates at this steady rate (tasks/s) instead of as fast as the
 * service takes them. nats-server's memory follows the rate it is written at (its block
 * buffers), so checkpoints compare like with like only when the rate is the same at each.
 */
function soakRate(): number | undefined {
  const raw = process.env.JETCRON_SOAK_RATE;
  if (raw === undefined || raw.trim() === '') return undefined;
  const r = Number(raw);
  if (!Number.isFinite(r) || r <= 0) throw new Error(`JETCRON_SOAK_RATE=${raw}: give a rate in tasks per second`);
  return r;
}

const TITLE_N = (() => {
  try {
    return soakTasks();
  } catch {
    return DEFAULT_TASKS;
  }
})();

/** Every 5% of n, and the fixed marks up to n; ascending, the last is n. */
export function checkpointMarks(n: number): number[] {
  const marks = new Set<number>();
  for (let k = 1; k <= 20; k++) marks.add(Math.round((n * k) / 20));
  for (const m of FIXED_MARKS) if (m <= n) marks.add(m);
  return [...marks].filter((m) => m > 0).sort((a, b) => a - b);
}

// ---------------------------------------------------------------- sampling

interface Snapshot {
  /** The checkpoint's nominal count ('start' before any load). */
  mark: number | 'start';
  /** ms since the first create (0 for the start row). */
  at: number;
  /** Distinct requests at the target. */
  arrived: number;
  /** Arrivals per second over the RECENT_RATE_MS before the checkpoint (NaN at start and at the last, after the drain). */
  recentRate: number;
  /** Executions `success` in Postgres. */
  success: number;
  /** The median of the last RSS_SAMPLES samples (the last second), with their range. */
  serviceRss: Sampled;
  serviceProcs: number;
  /** The service's main thread's V8 heap (heapReporter), ≤ 1 s old; undefined if not available. */
  heap: Heap | undefined;
  /** comm and RSS of each process of the service's tree (one sample). */
  serviceParts: { comm: string; rss: number }[];
  natsRss: Sampled;
  /** nats-server's Go heap from its gctrace lines: median of the last GO_GCS GCs; undefined before any. */
  goHeap: GoHeap | undefined;
  /** nats-server's Go runtime: memory taken from the OS, and handed back (its heap profile's MemStats). */
  goMem: GoMemStats | undefined;
  events: { messages: number; bytes: number; subjects: number };
  /** Every stream by name (KV buckets included): messages, bytes, subjects. */
  streams: Map<string, StreamState>;
  /** Every other stream (NOTIFY, INBOUND, KV buckets), bytes. */
  otherStreamsBytes: number;
  natsDirBytes: number;
  pgDbBytes: number;
  executionsBytes: number;
}

interface StreamState {
  messages: number;
  bytes: number;
  subjects: number;
  /** What the stream keeps, from its configuration as nats-server reports it. */
  retention: string;
}

interface Sampled {
  median: number;
  min: number;
  max: number;
  samples: number;
}

/** Bytes of resident memory (/proc/<pid>/status VmRSS); 0 if gone. */
function rssBytes(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** MemAvailable from /proc/meminfo, bytes; Infinity if unreadable. */
function memAvailable(): number {
  try {
    const m = /^MemAvailable:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m ? Number(m[1]) * 1024 : Infinity;
  } catch {
    return Infinity;
  }
}

/** pid and its descendants (from /proc/<pid>/stat parent links). */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const s = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      /* gone */
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]!) ?? []));
  return out;
}

/** Allocated size on disk (blocks, as `du` counts) of everything under dir. */
function diskBytes(dir: string): number {
  let total = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += diskBytes(p);
    else {
      try {
        total += statSync(p).blocks * 512;
      } catch {
        /* removed meanwhile (compacted blocks) */
      }
    }
  }
  return total;
}

/** The nats-server's data dir, from its command line (`nats-server -c <dir>/nats-server.conf`). */
function natsDataDir(pid: number | undefined): string | undefined {
  if (pid === undefined) return undefined;
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const conf = argv[argv.indexOf('-c') + 1];
    return argv.includes('-c') && conf ? path.dirname(conf) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A module preloaded into the service (NODE_OPTIONS --import, a data: URL) that writes,
 * once a second (an unref'd timer), its main thread's V8 heap: used now, and used right
 * after the last major (mark-compact) GC, seen through a PerformanceObserver on 'gc'
 * entries; the latter is the live heap without the garbage of the moment. Nothing in the
 * service's code changes.
 */
function heapReporter(file: string): string {
  const code = [
    "import { isMainThread } from 'node:worker_threads';",
    "import { renameSync, writeFileSync } from 'node:fs';",
    "import { PerformanceObserver, constants } from 'node:perf_hooks';",
    "import v8 from 'node:v8';",
    'if (isMainThread) {',
    `  const f = ${JSON.stringify(file)};`,
    '  let afterMajorGc = null, majorGcs = 0;',
    '  new PerformanceObserver((list) => {',
    '    for (const e of list.getEntries()) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) { majorGcs++; afterMajorGc = v8.getHeapStatistics().used_heap_size; }',
    "  }).observe({ entryTypes: ['gc'] });",
    '  const w = () => {',
    '    try {',
    '      const h = v8.getHeapStatistics();',
    "      writeFileSync(f + '.tmp', JSON.stringify({ heapUsed: h.used_heap_size, heapTotal: h.total_heap_size, afterMajorGc, majorGcs }));",
    "      renameSync(f + '.tmp', f);",
    '    } catch {}',
    '  };',
    '  w();',
    '  setInterval(w, 1000).unref();',
    '}',
  ].join('\n');
  return `--import=data:text/javascript,${encodeURIComponent(code)}`;
}

interface Heap {
  heapUsed: number;
  heapTotal: number;
  afterMajorGc: number | null;
  majorGcs: number;
}

function readHeap(file: string): Heap | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Heap;
  } catch {
    return undefined;
  }
}

const median = (xs: readonly number[]): number => {
  const v = [...xs].sort((x, y) => x - y);
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
};

function sampled(xs: readonly number[]): Sampled {
  return xs.length === 0 ? { median: 0, min: 0, max: 0, samples: 0 } : { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), samples: xs.length };
}

/**
 * RSS of the service's tree and of nats-server every RSS_SAMPLE_MS, the last RSS_SAMPLES
 * kept: a Go process's RSS swings ±20% from one moment to the next with its GC cycle, so a
 * checkpoint takes the median of the last second, not one reading. The service's tree is
 * walked again every 5 s (a /proc scan), its members read at every sample.
 */
function rssSampler(servicePid: number, natsPid: () => number | undefined) {
  const service: number[] = [];
  const nats: number[] = [];
  let tree = processTree(servicePid);
  let treeAt = hrMs();
  const push = (xs: number[], v: number) => {
    xs.push(v);
    if (xs.length > RSS_SAMPLES) xs.shift();
  };
  const sample = () => {
    if (hrMs() - treeAt > 5000) {
      tree = processTree(servicePid);
      treeAt = hrMs();
    }
    push(service, tree.reduce((a, pid) => a + rssBytes(pid), 0));
    const pid = natsPid();
    push(nats, pid === undefined ? 0 : rssBytes(pid));
  };
  sample();
  const timer = setInterval(sample, RSS_SAMPLE_MS);
  return {
    service: () => sampled(service),
    nats: () => sampled(nats),
    stop: () => clearInterval(timer),
  };
}

interface GoHeap {
  /** Heap in use right after a GC (the live heap), median of the last GO_GCS GCs. */
  live: number;
  /** The heap size the next GC is started at (GOGC), median of the same GCs. */
  goal: number;
  gcs: number;
}

/**
 * nats-server's Go heap from the lines GODEBUG=gctrace=1 makes it write per GC
 * ("gc 12 @3.4s 1%: …, 40->42->21 MB, 44 MB goal, …"): heap at the start, at the end, live
 * after; the goal. The live heap tells memory the server holds from memory its GC has not
 * handed back to the OS yet, which RSS mixes.
 */
function goHeapTracer(logFile: string) {
  const recent: { live: number; goal: number }[] = [];
  let gcs = 0;
  writeFileSync(logFile, '');
  return {
    env: { GODEBUG: 'gctrace=1' },
    line(line: string) {
      // Every line, stamped with the wall clock, for reading the Go heap against the checkpoints.
      appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`);
      const m = /^gc \d+ @.*?(\d+)->(\d+)->(\d+) MB, (\d+) MB goal/.exec(line);
      if (!m) return;
      gcs++;
      recent.push({ live: Number(m[3]) * MiB, goal: Number(m[4]) * MiB });
      if (recent.length > GO_GCS) recent.shift();
    },
    heap(): GoHeap | undefined {
      if (recent.length === 0) return undefined;
      return { live: median(recent.map((r) => r.live)), goal: median(recent.map((r) => r.goal)), gcs };
    },
  };
}

/**
 * nats-server's heap profile (Go's pprof, text form: in-use bytes by allocation site, then
 * runtime.MemStats) written at each checkpoint to bench/results/logs/soak.nats-heap.<mark>.txt,
 * so that what grows can be named by the function that allocated it.
 */
function natsHeapProfiles(port: number, dir: string) {
  return async (label: string): Promise<GoMemStats | undefined> => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/debug/pprof/heap?debug=1`);
      const text = await res.text();
      writeFileSync(path.join(dir, `soak.nats-heap.${label}.txt`), text);
      return goMemStats(text);
    } catch {
      return undefined; // a missed profile leaves a gap, not a failed run
    }
  };
}

/**
 * From runtime.MemStats at the end of a text heap profile: Sys, all the memory the Go
 * runtime has taken from the OS (it only grows: a high-water mark), and HeapReleased, the
 * part of it handed back since. RSS ≈ Sys − HeapReleased, so an RSS that moves while Sys
 * stays put is the scavenger's timing, not memory the server holds on to.
 */
interface GoMemStats {
  sys: number;
  heapReleased: number;
}

function goMemStats(text: string): GoMemStats | undefined {
  const field = (name: string) => Number(new RegExp(`^# ${name} = (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  const stats = { sys: field('Sys'), heapReleased: field('HeapReleased') };
  return Number.isFinite(stats.sys) && Number.isFinite(stats.heapReleased) ? stats : undefined;
}

type Rss = ReturnType<typeof rssSampler>;
type GoTrace = ReturnType<typeof goHeapTracer>;

/** The settings that say what a stream keeps, as one phrase. */
function retentionOf(c: { retention: string; max_age: number; max_msgs: number; max_bytes: number; max_msgs_per_subject?: number }): string {
  const parts = [c.retention === 'workqueue' ? 'work queue' : c.retention];
  if (c.max_age > 0) parts.push(`max_age ${c.max_age / 86_400e9 >= 1 ? `${c.max_age / 86_400e9} d` : `${c.max_age / 1e9} s`}`);
  if (c.max_msgs > 0) parts.push(`max_msgs ${c.max_msgs}`);
  if (c.max_bytes > 0) parts.push(`max_bytes ${c.max_bytes}`);
  if ((c.max_msgs_per_subject ?? 0) > 0) parts.push(`${c.max_msgs_per_subject} per subject`);
  if (parts.length === 1 && c.retention === 'limits') parts.push('no limit: kept forever');
  return parts.join(', ');
}

async function snapshot(s: Stack, nats: Nats, probes: { heapFile: string; natsDir: string | undefined; rss: Rss; go: GoTrace }, mark: Snapshot['mark'], at: number): Promise<Snapshot> {
  const [pgRow, sizes, streams, target] = await Promise.all([
    s.db.query<{ n: string }>("SELECT count(*) AS n FROM executions WHERE status = 'success'"),
    s.db.query<{ db: string; ex: string }>("SELECT pg_database_size(current_database()) AS db, pg_total_relation_size('executions') AS ex"),
    (async () => {
      const all = [];
      for await (const si of nats.jsm.streams.list()) all.push(si);
      return all;
    })(),
    s.target.stats(),
  ]);
  const tree = processTree(s.service.pid);
  const parts = tree.map((pid) => ({ comm: comm(pid), rss: rssBytes(pid) }));
  const heap = readHeap(probes.heapFile);
  const byName = new Map<string, StreamState>(
    streams.map((x) => [x.config.name, { messages: x.state.messages, bytes: x.state.bytes, subjects: x.state.num_subjects ?? 0, retention: retentionOf(x.config) }]),
  );
  const ev = byName.get(STREAMS.events.name);
  const others = [...byName].filter(([name]) => name !== STREAMS.events.name);
  return {
    mark,
    at,
    arrived: target.unique,
    recentRate: NaN,
    success: Number(pgRow.rows[0]?.n ?? 0),
    serviceRss: probes.rss.service(),
    serviceProcs: tree.length,
    heap,
    serviceParts: parts,
    natsRss: probes.rss.nats(),
    goHeap: probes.go.heap(),
    goMem: undefined,
    events: { messages: ev?.messages ?? 0, bytes: ev?.bytes ?? 0, subjects: ev?.subjects ?? 0 },
    streams: byName,
    otherStreamsBytes: others.reduce((a, [, x]) => a + x.bytes, 0),
    natsDirBytes: probes.natsDir ? diskBytes(probes.natsDir) : 0,
    pgDbBytes: Number(sizes.rows[0]?.db ?? 0),
    executionsBytes: Number(sizes.rows[0]?.ex ?? 0),
  };
}

// ---------------------------------------------------------------- formatting

const MiB = 2 ** 20;
const mib = (b: number | null | undefined) => (b == null ? '–' : (b / MiB).toFixed(1));
const kib = (b: number) => (b / 1024).toFixed(1);
const markLabel = (m: Snapshot['mark']) => (m === 'start' ? 'start (idle)' : m >= 1_000_000 && m % 1_000_000 === 0 ? `${m / 1_000_000}M` : m >= 1000 && m % 1000 === 0 ? `${m / 1000}k` : fmt.int(m));
const signedPct = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${x.toFixed(1)}%` : '–');

const range = (x: Sampled) => `${mib(x.median)} (${mib(x.min)}–${mib(x.max)})`;

function checkpointTable(rows: Snapshot[]): Table {
  return {
    headers: [
      'checkpoint',
      'elapsed',
      'success (PG)',
      'exec/s (interval / last 10 s)',
      'jetcron RSS MiB, median (range)',
      'V8 heap MiB (after GC / now)',
      'nats RSS MiB, median (range)',
      'nats Go heap MiB (live / goal)',
      'nats Go MiB from the OS / released',
      'EVENTS msgs',
      'EVENTS MiB',
      'EVENTS subjects',
      'other streams MiB',
      'nats dir MiB',
      'PG db MiB',
      'executions MiB',
    ],
    rows: rows.map((r, i) => {
      const prev = rows[i - 1];
      const rate = prev && r.mark !== 'start' && r.at > prev.at ? ((r.arrived - prev.arrived) * 1000) / (r.at - prev.at) : NaN;
      return [
        markLabel(r.mark),
        r.mark === 'start' ? '–' : fmt.s(r.at / 1000),
        fmt.int(r.success),
        `${fmt.rate(rate)} / ${fmt.rate(r.recentRate)}`,
        range(r.serviceRss),
        `${mib(r.heap?.afterMajorGc)} / ${mib(r.heap?.heapUsed)}`,
        range(r.natsRss),
        r.goHeap ? `${mib(r.goHeap.live)} / ${mib(r.goHeap.goal)}` : '–',
        r.goMem ? `${mib(r.goMem.sys)} / ${mib(r.goMem.heapReleased)}` : '–',
        fmt.int(r.events.messages),
        mib(r.events.bytes),
        fmt.int(r.events.subjects),
        mib(r.otherStreamsBytes),
        mib(r.natsDirBytes),
        mib(r.pgDbBytes),
        mib(r.executionsBytes),
      ];
    }),
  };
}

/**
 * Each stream against what its configuration keeps, at the reference and the last
 * checkpoint, with its bytes per execution in between: a stream kept forever grows by a
 * steady amount per execution, a work queue or a stream of one value per key stays put.
 */
function retentionTable(ref: Snapshot, last: Snapshot): Table {
  const executions = Math.max(1, last.success - ref.success);
  const names = [...new Set([...ref.streams.keys(), ...last.streams.keys()])].sort((a, b) => (last.streams.get(b)?.bytes ?? 0) - (last.streams.get(a)?.bytes ?? 0));
  const row = (name: string, retention: string, a: { messages: number; bytes: number; subjects?: number } | undefined, b: { messages: number; bytes: number; subjects?: number } | undefined) => [
    name,
    retention,
    a ? `${fmt.int(a.messages)} / ${mib(a.bytes)}${a.subjects === undefined ? '' : ` / ${fmt.int(a.subjects)}`}` : '–',
    b ? `${fmt.int(b.messages)} / ${mib(b.bytes)}${b.subjects === undefined ? '' : ` / ${fmt.int(b.subjects)}`}` : '–',
    a && b ? `${((b.messages - a.messages) / executions).toFixed(3)} / ${fmt.int((b.bytes - a.bytes) / executions)}` : '–',
  ];
  return {
    headers: ['store', 'retention (its configuration)', `at ${markLabel(ref.mark)}: msgs / MiB / subjects`, `at ${markLabel(last.mark)}`, 'per execution in between: msgs / bytes'],
    rows: [
      ...names.map((name) => row(name, (last.streams.get(name) ?? ref.streams.get(name))!.retention, ref.streams.get(name), last.streams.get(name))),
      ['Postgres database', 'every task and execution kept (no pruning)', `– / ${mib(ref.pgDbBytes)}`, `– / ${mib(last.pgDbBytes)}`, `– / ${fmt.int((last.pgDbBytes - ref.pgDbBytes) / executions)}`],
      ['executions table + indexes', 'a row per execution, kept', `– / ${mib(ref.executionsBytes)}`, `– / ${mib(last.executionsBytes)}`, `– / ${fmt.int((last.executionsBytes - ref.executionsBytes) / executions)}`],
    ],
  };
}

// ---------------------------------------------------------------- verdicts

interface Reference {
  row: Snapshot;
  how: string;
}

/**
 * The first checkpoint at or past 200k (the aim's) that came once the duplicate windows
 * were full, when the run goes past it; else the first after the windows that is not the
 * last; else (a short run) the checkpoint nearest N/2.
 */
function referenceRow(load: Snapshot[]): Reference {
  const last = load.at(-1)!;
  const full = (r: Snapshot) => r.at >= WINDOW_FULL_MS && r !== last;
  const aim = load.find((r) => full(r) && (r.mark as number) >= REFERENCE_AT);
  const windowNote = `the first after ${fmt.s(WINDOW_FULL_MS / 1000)} (the ${DEDUPE_WINDOW_MS / 60_000}-min duplicate window full, + 10 s)`;
  if (aim) return { row: aim, how: `the ${markLabel(aim.mark)} checkpoint: ${windowNote} at or past ${markLabel(REFERENCE_AT)}` };
  const after = load.find(full);
  if (after) return { row: after, how: `the ${markLabel(after.mark)} checkpoint: ${windowNote}; N is too small for one past ${markLabel(REFERENCE_AT)}` };
  const half = last.mark === 'start' ? 0 : last.mark / 2;
  const mid = load.reduce((best, r) => (Math.abs((r.mark as number) - half) < Math.abs((best.mark as number) - half) ? r : best), load[0]!);
  return { row: mid, how: `the ${markLabel(mid.mark)} checkpoint (N/2: the run ended before the duplicate windows were full, so its nats-server RSS verdict says little)` };
}

type Kind = 'flat' | 'log';

interface Quantity {
  name: string;
  unit: 'MiB' | 'KiB' | 'msgs';
  kind: Kind;
  /** flat: the last checkpoint at most this × the reference (+1 MiB). */
  factor?: number;
  /** What retention (or the design) says. */
  expected: string;
  pick: (r: Snapshot) => number | null | undefined;
}

const QUANTITIES: Quantity[] = [
  { name: 'jetcron RSS', unit: 'MiB', kind: 'flat', factor: RSS_FLAT_FACTOR, expected: 'bounded caches only', pick: (r) => r.serviceRss.median },
  { name: 'jetcron V8 heap after major GC', unit: 'MiB', kind: 'flat', expected: 'bounded caches only', pick: (r) => r.heap?.afterMajorGc },
  { name: 'nats-server RSS', unit: 'MiB', kind: 'flat', factor: RSS_FLAT_FACTOR, expected: 'flat once the duplicate windows are full', pick: (r) => r.natsRss.median },
  { name: 'nats-server Go heap, live', unit: 'MiB', kind: 'flat', expected: 'flat once the duplicate windows are full', pick: (r) => r.goHeap?.live },
  { name: 'nats-server memory from the OS (Go Sys)', unit: 'MiB', kind: 'flat', factor: RSS_FLAT_FACTOR, expected: 'a high-water mark: flat once the busiest moment has passed', pick: (r) => r.goMem?.sys },
  { name: 'EVENTS messages', unit: 'msgs', kind: 'log', expected: 'EVENTS keeps everything', pick: (r) => r.events.messages },
  { name: 'EVENTS bytes', unit: 'MiB', kind: 'log', expected: 'EVENTS keeps everything', pick: (r) => r.events.bytes },
  { name: 'other streams bytes', unit: 'MiB', kind: 'flat', expected: 'no timers, lanes or inbound; KV holds a value per key', pick: (r) => r.otherStreamsBytes },
  { name: 'nats data dir on disk', unit: 'MiB', kind: 'log', expected: 'EVENTS keeps everything', pick: (r) => r.natsDirBytes },
  { name: 'Postgres database size', unit: 'MiB', kind: 'log', expected: 'the read models keep every task and execution', pick: (r) => r.pgDbBytes },
  { name: 'executions table (with indexes)', unit: 'MiB', kind: 'log', expected: 'a row per execution, kept', pick: (r) => r.executionsBytes },
];

/** Least-squares slope of y over x; 0 with fewer than two points. */
function slope(points: [number, number][]): number {
  if (points.length < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / points.length;
  const my = points.reduce((a, [, y]) => a + y, 0) / points.length;
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / sxx;
}

/**
 * Least squares of y = b0 + b1·x1 + b2·x2 (the normal equations, centred, by Cramer's rule);
 * undefined when x1 and x2 are collinear.
 */
function fitTwo(points: [number, number, number][]): { b1: number; b2: number } | undefined {
  const n = points.length;
  const m = [0, 1, 2].map((k) => points.reduce((a, p) => a + p[k]!, 0) / n);
  const s = (i: number, j: number) => points.reduce((a, p) => a + (p[i]! - m[i]!) * (p[j]! - m[j]!), 0);
  const [s11, s22, s12, s1y, s2y] = [s(0, 0), s(1, 1), s(0, 1), s(0, 2), s(1, 2)];
  const det = s11 * s22 - s12 * s12;
  if (!(Math.abs(det) > 1e-9 * s11 * s22)) return undefined;
  return { b1: (s1y * s22 - s2y * s12) / det, b2: (s11 * s2y - s12 * s1y) / det };
}

const inUnit = (q: Quantity, v: number, signed = false) => {
  const sign = signed && v >= 0 ? '+' : '';
  if (q.unit === 'MiB') return `${sign}${mib(v)} MiB`;
  if (q.unit === 'KiB') return `${sign}${kib(v)} KiB`;
  return `${sign}${fmt.int(v)}`;
};

interface Verdict {
  q: Quantity;
  ref: number;
  last: number;
  per100k: number;
  halves: [number, number] | undefined;
  peak: number;
  /** Least-squares slope over the checkpoints from the reference on, per 100k executions. */
  trend: number;
  /** The same with the recent rate as a second variable: growth per 100k at a constant rate, and per 1,000/s. */
  atConstantRate: { per100k: number; per1000PerS: number } | undefined;
  verdict: string;
  ok: boolean | undefined;
}

function verdictOf(q: Quantity, ref: Reference, rows: Snapshot[]): Verdict | undefined {
  const last = rows.at(-1)!;
  const a = q.pick(ref.row);
  const b = q.pick(last);
  if (a == null || b == null) return undefined;
  const span = rows.filter((r) => r.at >= ref.row.at);
  const per100k = (x: Snapshot, y: Snapshot) => (((q.pick(y) ?? 0) - (q.pick(x) ?? 0)) / Math.max(1, y.success - x.success)) * 100_000;
  const midCount = (ref.row.success + last.success) / 2;
  const mid = span.reduce((best, r) => (Math.abs(r.success - midCount) < Math.abs(best.success - midCount) ? r : best), span[0]!);
  const peak = Math.max(...span.map((r) => q.pick(r) ?? 0));
  const trend = slope(span.filter((r) => q.pick(r) != null).map((r) => [r.success, q.pick(r)!])) * 100_000;
  const withRate = span.filter((r) => q.pick(r) != null && Number.isFinite(r.recentRate));
  const fit = withRate.length >= 4 ? fitTwo(withRate.map((r) => [r.success, r.recentRate, q.pick(r)!])) : undefined;
  const atConstantRate = fit && { per100k: fit.b1 * 100_000, per1000PerS: fit.b2 * 1000 };
  const base = { q, ref: a, last: b, per100k: per100k(ref.row, last), halves: mid !== ref.row && mid !== last ? ([per100k(ref.row, mid), per100k(mid, last)] as [number, number]) : undefined, peak, trend, atConstantRate };
  if (q.kind === 'flat') {
    const ok = b <= (q.factor ?? FLAT_FACTOR) * a + (q.unit === 'MiB' ? MiB : 0);
    const windows = q.name.startsWith('nats-server') && ref.row.at < DEDUPE_WINDOW_MS ? ' (duplicate windows still filling at the reference; see notes)' : '';
    return { ...base, verdict: `${ok ? 'flat' : 'NOT flat'}${windows}`, ok };
  }
  const grows = b > 1.05 * a && base.per100k > 0;
  return { ...base, verdict: grows ? `grows with the log (expected: ${q.expected})` : `does not grow (NOT expected: ${q.expected})`, ok: undefined };
}

function verdictTable(ref: Reference, last: Snapshot, vs: Verdict[]): Table {
  return {
    headers: ['quantity', `at ${markLabel(ref.row.mark)} (reference)`, `at ${markLabel(last.mark)}`, 'change', 'per 100k executions', 'first / second half, per 100k', 'trend per 100k (least squares)', 'per 100k at a constant rate / per 1,000 exec/s (fit with the last 10 s\'s rate)', 'peak since reference', 'verdict'],
    rows: vs.map((v) => [
      v.q.name,
      inUnit(v.q, v.ref),
      inUnit(v.q, v.last),
      v.ref > 0 ? signedPct((100 * (v.last - v.ref)) / v.ref) : '–',
      inUnit(v.q, v.per100k, true),
      v.halves ? `${inUnit(v.q, v.halves[0], true)} / ${inUnit(v.q, v.halves[1], true)}` : '–',
      inUnit(v.q, v.trend, true),
      v.q.kind === 'flat' && v.atConstantRate ? `${inUnit(v.q, v.atConstantRate.per100k, true)} / ${inUnit(v.q, v.atConstantRate.per1000PerS, true)}` : '–',
      inUnit(v.q, v.peak),
      v.verdict,
    ]),
  };
}

// ---------------------------------------------------------------- the benchmark

export const soak: Benchmark = {
  name: 'soak',
  title: `Soak: ${fmt.int(TITLE_N)} immediate tasks through one \`jetcron serve\` process (API, concurrency ${CONCURRENCY}, at most ${fmt.int(MAX_OUTSTANDING)} outstanding); memory and storage at checkpoints`,
  async run(ctx) {
    const n = soakTasks();
    const heapDir = mkdtempSync(path.join(os.tmpdir(), 'jetcron-bench-soak-'));
    const rm = () => rmSync(heapDir, { recursive: true, force: true });
    const removeHeapDir = onCleanup(`rm ${heapDir}`, async () => rm(), rm);
    const heapFile = path.join(heapDir, 'heap.json');
    writeFileSync(heapFile, '');
    const nodeOptions = [process.env.NODE_OPTIONS, heapReporter(heapFile)].filter(Boolean).join(' ');
    const logDir = path.join(RESULTS_DIR, 'logs');
    mkdirSync(logDir, { recursive: true });
    const go = goHeapTracer(path.join(logDir, 'soak.nats.log'));
    const profPort = await freePort();
    try {
      return await withStack(ctx, this.name, (s) => soakRun(ctx, s, n, { heapFile, go, natsProfile: natsHeapProfiles(profPort, logDir) }, this.title), {
        env: { JETCRON_PROCESSES: '1', NODE_OPTIONS: nodeOptions },
        nats: { env: go.env, log: go.line, profPort },
      });
    } finally {
      await removeHeapDir();
    }
  },
};

async function soakRun(ctx: BenchContext, s: Stack, n: number, traces: { heapFile: string; go: GoTrace; natsProfile: (label: string) => Promise<GoMemStats | undefined> }, title: string): Promise<BenchResult> {
  const nats = await connectNats(s.nats.url, 'bench-soak');
  const rss = rssSampler(s.service.pid, () => s.nats.pid());
  try {
    const probes = { ...traces, natsDir: natsDataDir(s.nats.pid()), rss };
    const marks = checkpointMarks(n);
    const take = async (mark: Snapshot['mark'], at: number) => {
      const [r, goMem] = await Promise.all([snapshot(s, nats, probes, mark, at), traces.natsProfile(mark === 'start' ? 'start' : markLabel(mark))]);
      return { ...r, goMem };
    };
    const rows: Snapshot[] = [];
    // The idle service, a moment after the org exists (the heap file has been written).
    await sleep(1500);
    rows.push(await take('start', 0));

    const task = (i: number) => ({ url: `${s.target.url}/hit?id=s${i}`, name: `soak-${i}`, body: { n: i }, retry_attempts: 0 });
    let startedCount = 0;
    let arrived = 0;
    let maxOutstanding = 0;
    let pollsAtBound = 0;
    let polls = 0;
    /** Set when the machine runs short of memory: no more creates. */
    let stoppedEarly: string | undefined;
    const t0 = hrMs();
    const cpuEnd = s.startCpuPhase();
    const logRow = (r: Snapshot) =>
      ctx.log(
        `soak: ${markLabel(r.mark)} (${new Date().toISOString().slice(11, 19)}): ${fmt.int(r.success)} success at ${fmt.s(r.at / 1000)}, ${fmt.rate(r.recentRate)} over the last 10 s; jetcron RSS ${range(r.serviceRss)} MiB, heap after GC ${mib(r.heap?.afterMajorGc)} MiB, nats RSS ${range(r.natsRss)} MiB, Go heap ${mib(r.goHeap?.live)} / ${mib(r.goHeap?.goal)} MiB, Go from the OS ${mib(r.goMem?.sys)} MiB, EVENTS ${mib(r.events.bytes)} MiB / ${r.events.subjects} subjects, PG ${mib(r.pgDbBytes)} MiB`,
      );

    // The target's distinct count every 250 ms: the feed's bound, and the checkpoints before the last.
    let polling = true;
    let nextMark = 0;
    /** (time, arrived) of the polls of the last RECENT_RATE_MS, and one before. */
    const recent: [number, number][] = [];
    const recentRate = () => {
      const [t0r, a0] = recent[0]!;
      const [t1r, a1] = recent.at(-1)!;
      return t1r > t0r ? ((a1 - a0) * 1000) / (t1r - t0r) : NaN;
    };
    const poller = (async () => {
      while (polling) {
        const st = await s.target.stats().catch(() => undefined);
        if (st) arrived = st.unique;
        recent.push([hrMs(), arrived]);
        while (recent.length > 2 && recent[1]![0] <= hrMs() - RECENT_RATE_MS) recent.shift();
        const outstanding = startedCount - arrived;
        polls++;
        if (outstanding > maxOutstanding) maxOutstanding = outstanding;
        if (outstanding >= MAX_OUTSTANDING - CONCURRENCY) pollsAtBound++;
        const available = memAvailable();
        if (available < MIN_AVAILABLE_BYTES && stoppedEarly === undefined) {
          stoppedEarly = `the machine had ${mib(available)} MiB available (< ${mib(MIN_AVAILABLE_BYTES)} MiB) after ${fmt.int(startedCount)} creates, ${fmt.s((hrMs() - t0) / 1000)} in`;
          ctx.log(`soak: STOPPING THE FEED: ${stoppedEarly}`);
        }
        if (nextMark < marks.length - 1 && arrived >= marks[nextMark]!) {
          let mark = marks[nextMark]!;
          while (nextMark < marks.length - 1 && arrived >= marks[nextMark]!) mark = marks[nextMark++]!;
          const r = await take(mark, hrMs() - t0).catch((e: Error) => (ctx.log(`soak: checkpoint ${mark} failed: ${e.message}`), undefined));
          if (r) {
            r.recentRate = recentRate();
            rows.push(r);
            logRow(r);
          }
        }
        await sleep(POLL_MS);
      }
    })();

    const rate = soakRate();
    const load = await closedLoop({
      concurrency: CONCURRENCY,
      maxCount: n,
      maxMs: CREATE_MAX_MS,
      fn: async (i) => {
        // Paced: each index waits for its place on the plan (the workers take indexes in order).
        if (rate !== undefined) {
          const wait = t0 + (i * 1000) / rate - hrMs();
          if (wait > 0) await sleep(wait);
        }
        while (i - arrived >= MAX_OUTSTANDING && hrMs() - t0 < CREATE_MAX_MS && stoppedEarly === undefined) await sleep(50);
        if (stoppedEarly !== undefined) return;
        startedCount++;
        await s.api.createTask(task(i));
      },
    });
    const createEnd = hrMs();
    const createdOk = s.api.outcomes.count('201');
    ctx.log(`soak: creates done: ${fmt.int(createdOk)} answered 201 of ${fmt.int(startedCount)} in ${fmt.s((createEnd - t0) / 1000)}; waiting for Postgres`);
    polling = false;
    await poller;

    // Drain: until Postgres shows every created task's execution as success (1 s polls), a stall, or the bound.
    let success = await countExecutions(s.db);
    let lastMove = hrMs();
    let completeAt: number | undefined = success >= createdOk ? hrMs() : undefined;
    while (completeAt === undefined && hrMs() - createEnd < DRAIN_MAX_MS && hrMs() - lastMove < STALL_MS) {
      await sleep(1000);
      const now = await countExecutions(s.db);
      if (now !== success) lastMove = hrMs();
      success = now;
      if (success >= createdOk) completeAt = hrMs();
    }
    // Stopped early: the last row is named by what was created, not by N.
    const last = await take(startedCount < n ? startedCount : marks.at(-1)!, hrMs() - t0);
    rows.push(last);
    logRow(last);
    const cpu = cpuEnd();

    // Correctness: by the target (ids s0…s<n-1>; nothing else calls it) and by Postgres.
    const st = await s.target.stats();
    const statuses = await executionStatuses(s.db);
    const allArrived = st.unique === n && createdOk === n;
    const allSuccess = last.success === n;
    const e2eSeconds = ((completeAt ?? hrMs()) - t0) / 1000;
    const execRate = last.success / e2eSeconds;

    const loadRows = rows.filter((r) => r.mark !== 'start');
    const ref = referenceRow(loadRows);
    const verdicts = QUANTITIES.map((q) => verdictOf(q, ref, loadRows)).filter((v): v is Verdict => v !== undefined);
    const short = (name: string): Metric => {
      const v = verdicts.find((x) => x.q.name === name);
      if (!v) return { label: name, value: 'not measured' };
      return {
        label: name,
        value: `${v.verdict.split(' (')[0]}: ${inUnit(v.q, v.ref)} → ${inUnit(v.q, v.last)} (${signedPct((100 * (v.last - v.ref)) / v.ref)})`,
        goal: `≤ ${v.q.factor ?? FLAT_FACTOR} × at ${markLabel(ref.row.mark)}`,
        ok: v.ok,
      };
    };
    const rssVerdict = short('jetcron RSS');
    const heapVerdict = short('jetcron V8 heap after major GC');
    const natsVerdict = short('nats-server RSS');
    const goVerdict = short('nats-server Go heap, live');
    const goSysVerdict = short('nats-server memory from the OS (Go Sys)');
    // The aim's own words, "from 200k to 1M", next to the reference after the windows.
    const at200k = loadRows.find((r) => r.mark === REFERENCE_AT);
    const fromAim = (pick: (r: Snapshot) => number) => (at200k && at200k !== last ? `${mib(pick(at200k))} → ${mib(pick(last))} MiB (${signedPct((100 * (pick(last) - pick(at200k))) / pick(at200k))})` : '–');

    const metrics: Metric[] = [
      { label: 'executions asked for', value: `${fmt.int(n)}${process.env.JETCRON_SOAK_TASKS ? ' (JETCRON_SOAK_TASKS)' : ''}` },
      { label: 'create rate', value: rate === undefined ? 'as fast as the service answers (closed loop)' : `${fmt.int(rate)}/s steady (JETCRON_SOAK_RATE)` },
      { label: 'tasks created (201)', value: `${fmt.int(createdOk)} of ${fmt.int(startedCount)} sent; ${s.api.outcomes.describe()}` },
      { label: 'target received (distinct / duplicates)', value: `${fmt.int(st.unique)} / ${fmt.int(st.duplicates)}`, goal: `${fmt.int(n)} / 0`, ok: allArrived && st.duplicates === 0 },
      { label: 'executions success in Postgres', value: fmt.int(last.success), goal: fmt.int(n), ok: allSuccess },
      { label: 'execution statuses in Postgres', value: statuses },
      { label: 'first create → all success in Postgres', value: completeAt ? `${fmt.s(e2eSeconds)} → ${fmt.rate(execRate)}` : `not reached (${fmt.int(last.success)} of ${fmt.int(createdOk)} after ${fmt.s(e2eSeconds)})` },
      { label: 'outstanding, max (creates started − at target)', value: `${fmt.int(maxOutstanding)} (bound ${fmt.int(MAX_OUTSTANDING)}; at the bound in ${fmt.pct((100 * pollsAtBound) / Math.max(1, polls))} of polls)` },
      rssVerdict,
      heapVerdict,
      natsVerdict,
      goVerdict,
      goSysVerdict,
      { label: `RSS medians from the ${markLabel(REFERENCE_AT)} checkpoint (${at200k ? fmt.s(at200k.at / 1000) : '–'} in), jetcron / nats-server`, value: `${fromAim((r) => r.serviceRss.median)} / ${fromAim((r) => r.natsRss.median)}` },
      { label: 'EVENTS per execution', value: `${(last.events.messages / Math.max(1, last.success)).toFixed(2)} msgs, ${fmt.int(last.events.bytes / Math.max(1, last.success))} B; ${fmt.int(last.events.subjects)} subjects` },
    ];
    const notes = [
      `reference: ${ref.how}. flat: the last checkpoint is at most ${RSS_FLAT_FACTOR} × the reference for RSS (issue 21, aim 9), ${FLAT_FACTOR} × for the heaps and the small streams (+1 MiB, for quantities near zero such as the streams besides EVENTS). "per 100k executions": the change from the reference to the last checkpoint over the executions finished (success in Postgres) in between, × 100,000; the halves split that span at the checkpoint nearest its middle; the trend is the least-squares slope over every checkpoint from the reference on; "at a constant rate" fits the same checkpoints (the last, after the drain, left out) to executions and the rate of the ${RECENT_RATE_MS / 1000} s before each (target arrivals), since a process's heap follows the work in flight and the machine's other load moves the rate: its first figure is the growth with the log alone.`,
      `RSS: each checkpoint's is the median of the last ${RSS_SAMPLES} samples of VmRSS, one every ${RSS_SAMPLE_MS} ms (the range in brackets), since a single reading of nats-server swings ±20% with its GC cycle. nats-server Go heap: from the lines GODEBUG=gctrace=1 makes it write at each GC, the median of the last ${GO_GCS} GCs (${last.goHeap?.gcs ?? 0} GCs by the end): the live heap after a GC and the goal the next starts at (GOGC=100: twice the live heap, lower near the GOMEMLIMIT nats-server runs with, ${process.env.GOMEMLIMIT || defaultNatsMemoryLimit()}); RSS over the goal is memory the Go runtime has not handed back to the OS yet. Go from the OS / released: runtime.MemStats Sys and HeapReleased from nats-server's heap profile (pprof on a \`prof_port\`, written whole to bench/results/logs/soak.nats-heap.<checkpoint>.txt with the in-use bytes by allocation site): Sys never falls, so it is flat exactly when the server stopped taking memory; RSS ≈ Sys − released.`,
      `checkpoints before the last are taken when the target has received that many distinct requests (polled every ${POLL_MS} ms), the last once Postgres shows every created task's execution as success (or progress stalled ${STALL_MS / 1000} s); exec/s (interval) counts target arrivals between checkpoints.`,
      `jetcron RSS: VmRSS of the \`jetcron serve\` process and its descendants (run with JETCRON_PROCESSES=1), at the last checkpoint ${last.serviceParts.map((p) => `${p.comm} ${mib(p.rss)} MiB`).join(' + ')}. V8 heap: the service's main thread, written once a second by a module preloaded with NODE_OPTIONS --import (≤ 1 s old): used right after the last major GC (${last.heap?.majorGcs ?? 0} major GCs by the end), and used at that moment. nats dir: allocated blocks under the nats-server's data dir. other streams: TIMERS, LANES, NOTIFY, INBOUND, HELD and the KV buckets.`,
      `nats-server keeps the msg id of every message published in EVENTS' duplicate window (${DEDUPE_WINDOW_MS / 60_000} min) in memory, so its RSS is expected to grow until the run is that old${ref.row.at < DEDUPE_WINDOW_MS ? `; the reference checkpoint came ${fmt.s(ref.row.at / 1000)} in${last.at < DEDUPE_WINDOW_MS ? ` and the last ${fmt.s(last.at / 1000)} in, so the windows were filling for the whole run` : ''}` : ''}.`,
      ...s.api.outcomes.examples,
      ...troubleNotes(s.service),
    ];
    if (stoppedEarly) notes.push(`STOPPED EARLY: ${stoppedEarly}; the feed made no more creates.`);
    else if (load.started < n) notes.push(`STOPPED EARLY: the feed's time bound (${CREATE_MAX_MS / 60_000} min) ended it after ${fmt.int(startedCount)} creates.`);
    if (!allArrived) notes.push(`MISSING: the target received ${fmt.int(st.unique)} distinct requests of ${fmt.int(n)} asked for (${fmt.int(createdOk)} created).`);
    if (!allSuccess) notes.push(`UNFINISHED: Postgres shows ${fmt.int(last.success)} success executions of ${fmt.int(n)} (${statuses}).`);

    return {
      name: 'soak',
      title,
      metrics,
      headline: [
        { label: 'soak executions/s', value: `${fmt.rate(execRate)} over ${fmt.int(last.success)}` },
        { label: 'soak correct (target + Postgres)', value: `${fmt.int(st.unique)} arrived, ${fmt.int(last.success)} success of ${fmt.int(n)}`, ok: allArrived && allSuccess && st.duplicates === 0 },
        { ...rssVerdict, label: 'soak jetcron RSS' },
        { ...natsVerdict, label: 'soak nats-server RSS' },
        { ...goSysVerdict, label: 'soak nats-server memory from the OS (Go Sys)' },
      ],
      tables: [
        { title: 'Checkpoints (sizes at that moment; exec/s over the interval since the previous row)', table: checkpointTable(rows) },
        { title: `Verdicts (reference: ${markLabel(ref.row.mark)}, ${fmt.s(ref.row.at / 1000)} in)`, table: verdictTable(ref, last, verdicts) },
        { title: `Streams and Postgres against retention (from the reference, ${markLabel(ref.row.mark)}, to the end)`, table: retentionTable(ref.row, last) },
      ],
      cpu: { phase: 'first create → all success (or give-up)', report: cpu, units: { count: last.success, what: 'execution' } },
      notes,
    };
  } finally {
    rss.stop();
    await nats.close();
  }
}
