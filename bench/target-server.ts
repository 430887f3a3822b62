/**
 * The benchmarks' HTTP target, run as a forked child so it has its own event loop.
 * Answers every request 200 at once and records its arrival: the `id` query
 * parameter (when present), process.hrtime (CLOCK_MONOTONIC, comparable across
 * processes on one machine) and a sub-millisecond wall clock. Requests with a
 * `lane` query parameter (and `i`, their index in the lane) are also kept one by
 * one, duplicates included, with their arrival and the time the response was
 * written (the `finish` event), for the lane-order benchmark. The parent asks
 * for the records over IPC.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type TargetCommand =
  | { id: number; cmd: 'reset' }
  | { id: number; cmd: 'stats'; arrivals: boolean }
  | { id: number; cmd: 'lanes' }
  | { id: number; cmd: 'scheds' };

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
let laneRecords: LaneRecord[] = [];
let schedRecords: SchedRecord[] = [];

const server = http.createServer((req, res) => {
  const hr = hrMs();
  const wall = wallMs();
  count++;
  firstHrMs ??= hr;
  lastHrMs = hr;
  const url = req.url ?? '/';
  const q = url.indexOf('id=');
  if (q === -1) {
    anonymous++;
  } else {
    const end = url.indexOf('&', q);
    const id = url.slice(q + 3, end === -1 ? undefined : end);
    if (firstSeen.has(id)) duplicates++;
    else firstSeen.set(id, [hr, wall]);
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
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 130_000;
server.maxRequestsPerSocket = 0;

function stats(withArrivals: boolean): TargetStats {
  const out: TargetStats = { count, unique: firstSeen.size, duplicates, anonymous, firstHrMs, lastHrMs };
  if (withArrivals) out.arrivals = [...firstSeen].map(([id, [hr, wall]]) => [id, hr, wall]);
  return out;
}

process.on('message', (raw) => {
  const m = raw as TargetCommand;
  if (m.cmd === 'reset') {
    count = anonymous = duplicates = 0;
    firstHrMs = lastHrMs = null;
    firstSeen = new Map();
    laneRecords = [];
    schedRecords = [];
    process.send?.({ id: m.id, ok: true });
  } else if (m.cmd === 'stats') {
    process.send?.({ id: m.id, stats: stats(m.arrivals) });
  } else if (m.cmd === 'lanes') {
    process.send?.({ id: m.id, lanes: laneRecords });
  } else if (m.cmd === 'scheds') {
    process.send?.({ id: m.id, scheds: schedRecords });
  }
});
// The parent went away: nothing left to serve.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  const port = (server.address() as AddressInfo).port;
  process.send?.({ ready: true, port });
});
