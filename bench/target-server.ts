/**
 * The benchmarks' HTTP target, run as a forked child so it has its own event loop.
 * Answers every request 200 at once and records its arrival: the `id` query
 * parameter (when present), process.hrtime (CLOCK_MONOTONIC, comparable across
 * processes on one machine) and a sub-millisecond wall clock. Requests with a
 * `lane` query parameter (and `i`, their index in the lane) are also kept one by
 * one, duplicates included, with their arrival and the time the response was
 * written (the `finish` event), for the lane-order benchmark. The parent asks
 * for the records over IPC. Requests to the path `/body-id` take their id from
 * the body instead (`"bid":"<id>"` within the first 200 bytes), for forwarded
 * inbound webhooks whose URL is fixed; the arrival is still the request's first
 * byte. Every `X-Jetcron-Execution-Id` is counted too, repeats apart. During an
 * "outage" (the `outage` command) a request carrying `outage=1` is answered 200 with
 * the body `down`, so a task expecting `ok` fails without its host counting a failure.
 *
 * With `--plain` it records nothing: it reads the body and answers 200
 * `{"ok":true}`, a yardstick for what a bare Node HTTP server does on this machine.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type TargetCommand =
  | { id: number; cmd: 'reset' }
  | { id: number; cmd: 'stats'; arrivals: boolean }
  | { id: number; cmd: 'lanes' }
  | { id: number; cmd: 'scheds' }
  | { id: number; cmd: 'outage'; on: boolean };

/** One request carrying `?sched=<i>` (schedule ticks), repeats included: [i, wall-clock ms]. */
export type SchedRecord = [number, number];

/** One request of a lane: [lane, index, arrival hrMs, response written hrMs (NaN if never)]. */
export type LaneRecord = [string, number, number, number];

export interface TargetStats {
  /** Requests received since the last reset. */
  count: number;
  /** Distinct `id` values among them. */
  unique: number;
  /** Requests whose `id` had been seen before (at-least-once re-deliveries). */
  duplicates: number;
  /** Requests without an `id`. */
  anonymous: number;
  /** Distinct `X-Jetcron-Execution-Id` values. */
  executionIds: number;
  /** Requests whose `X-Jetcron-Execution-Id` had been seen before. */
  executionIdRepeats: number;
  firstHrMs: number | null;
  lastHrMs: number | null;
  /** First arrival per id: [id, hrMs, wallMs]; only when asked for. */
  arrivals?: [string, number, number][];
}

const hrMs = (): number => Number(process.hrtime.bigint()) / 1e6;
const wallMs = (): number => performance.timeOrigin + performance.now();

let count = 0;
let anonymous = 0;
let duplicates = 0;
let firstHrMs: number | null = null;
let lastHrMs: number | null = null;
let firstSeen = new Map<string, [number, number]>();
let executionIds = new Set<string>();
let executionIdRepeats = 0;
let laneRecords: LaneRecord[] = [];
let schedRecords: SchedRecord[] = [];
let outage = false;

function recordId(id: string | undefined, hr: number, wall: number): void {
  if (id === undefined) anonymous++;
  else if (firstSeen.has(id)) duplicates++;
  else firstSeen.set(id, [hr, wall]);
}

function answer(res: http.ServerResponse, type = 'text/plain', body = 'ok'): void {
  res.writeHead(200, { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

const recording = (req: http.IncomingMessage, res: http.ServerResponse) => {
  const hr = hrMs();
  const wall = wallMs();
  count++;
  firstHrMs ??= hr;
  lastHrMs = hr;
  const url = req.url ?? '/';
  const execution = req.headers['x-jetcron-execution-id'];
  if (typeof execution === 'string') {
    if (executionIds.has(execution)) executionIdRepeats++;
    else executionIds.add(execution);
  }
  if (url.startsWith('/body-id')) {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const head = Buffer.concat(chunks).subarray(0, 200).toString();
      recordId(/"bid":"([^"]*)"/.exec(head)?.[1], hr, wall);
      answer(res);
    });
    return;
  }
  const q = url.indexOf('id=');
  if (q === -1) {
    recordId(undefined, hr, wall);
  } else {
    const end = url.indexOf('&', q);
    recordId(url.slice(q + 3, end === -1 ? undefined : end), hr, wall);
  }
  const sq = url.indexOf('sched=');
  if (sq !== -1) schedRecords.push([parseInt(url.slice(sq + 6), 10), wall]);
  if (url.includes('lane=')) {
    const params = new URLSearchParams(url.slice(url.indexOf('?') + 1));
    const rec: LaneRecord = [params.get('lane') ?? '', Number(params.get('i')), hr, NaN];
    laneRecords.push(rec);
    res.once('finish', () => (rec[3] = hrMs()));
  }
  req.resume();
  const down = outage && url.includes('outage=1');
  req.on('end', () => (down ? answer(res, 'text/plain', 'down') : answer(res)));
};

const plain = (req: http.IncomingMessage, res: http.ServerResponse) => {
  req.resume();
  req.on('end', () => answer(res, 'application/json', '{"ok":true}'));
};

const server = http.createServer(process.argv.includes('--plain') ? plain : recording);
server.keepAliveTimeout = 120_000;
server.headersTimeout = 130_000;
server.maxRequestsPerSocket = 0;

function stats(withArrivals: boolean): TargetStats {
  const out: TargetStats = { count, unique: firstSeen.size, duplicates, anonymous, executionIds: executionIds.size, executionIdRepeats, firstHrMs, lastHrMs };
  if (withArrivals) out.arrivals = [...firstSeen].map(([id, [hr, wall]]) => [id, hr, wall]);
  return out;
}

process.on('message', (raw) => {
  const m = raw as TargetCommand;
  if (m.cmd === 'reset') {
    count = anonymous = duplicates = executionIdRepeats = 0;
    firstHrMs = lastHrMs = null;
    firstSeen = new Map();
    executionIds = new Set();
    laneRecords = [];
    schedRecords = [];
    process.send?.({ id: m.id, ok: true });
  } else if (m.cmd === 'stats') {
    process.send?.({ id: m.id, stats: stats(m.arrivals) });
  } else if (m.cmd === 'lanes') {
    process.send?.({ id: m.id, lanes: laneRecords });
  } else if (m.cmd === 'scheds') {
    process.send?.({ id: m.id, scheds: schedRecords });
  } else if (m.cmd === 'outage') {
    outage = m.on;
    process.send?.({ id: m.id, ok: true });
  }
});
// The parent went away: nothing left to serve.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as AddressInfo).port;
  process.send?.({ ready: true, port });
});
