import { duration } from './progress.ts';
import type { StatusReport } from './status.ts';

type Cell = string | number | null;

/** Columns padded to their widest cell; numbers right-aligned so their digits line up. */
export function table(headers: string[], rows: Cell[][]): string {
  const text = rows.map((r) => r.map((c) => (c === null ? '-' : typeof c === 'number' ? c.toLocaleString('en-US') : c)));
  const numeric = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number' || r[i] === null));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(headers), ...text.map(line)].join('\n');
}

function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

function when(isoTime: string | null, now: number): string {
  if (!isoTime) return '-';
  const ms = Date.parse(isoTime);
  const ago = (now - ms) / 1000;
  return `${isoTime.replace(/\.\d+Z$/, 'Z')} (${ago >= 0 ? `${duration(ago)} ago` : `in ${duration(-ago)}`})`;
}

/** `jetcron status` without `--json`: one titled table per part. */
export function statusText(r: StatusReport): string {
  const now = Date.parse(r.checked_at);
  const out: string[] = [`jetcron status at ${r.checked_at}`];
  const section = (title: string, body: string) => out.push('', title, body);
  section('STREAMS', table(['stream', 'messages', 'bytes', 'oldest message', 'last seq'],
    r.streams.map((s) => [s.name, s.messages, bytes(s.bytes), when(s.first_time, now), s.last_seq])));
  section('DURABLE CONSUMERS', table(['consumer', 'stream', 'pending', 'ack pending', 'redelivered', 'waiting pulls'],
    r.consumers.map((c) => [c.name, c.stream, c.num_pending, c.num_ack_pending, c.redelivered, c.waiting_pulls])));
  section('ORDERED READERS', table(['reader', 'stream', 'checkpoint in', 'position', 'stream last seq', 'lag'],
    r.readers.map((c) => [c.name, c.stream, c.checkpoint_in, c.position, c.last_seq, c.lag])));
  section('PROJECTIONS (Postgres)', r.projections === null
    ? 'not read (see ERRORS)'
    : table(['projection', 'position', 'EVENTS last seq', 'lag', 'updated'],
      r.projections.map((p) => [p.name, p.position, p.events_last_seq, p.lag, when(p.updated_at, now)])));
  section('LEASES', r.leases.length === 0
    ? 'none held'
    : table(['lease', 'holder', 'pid', 'expires in'], r.leases.map((l) => [l.name, l.holder, l.holder_pid === null ? null : String(l.holder_pid), `${l.expires_in_seconds.toFixed(1)} s`])));
  const m = r.monitors;
  if (m) {
    const reasons = Object.entries(m.down_reasons).sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ${n}`).join(', ');
    section('MONITORS', table(['total', 'new', 'up', 'down', 'paused', 'down because', 'deadline timers', 'overdue'],
      [[m.total, m.by_status.new ?? 0, m.by_status.up ?? 0, m.by_status.down ?? 0, m.by_status.paused ?? 0, reasons || '-', m.deadlines_armed, m.deadlines_overdue]]));
  }
  const f = r.flow_control;
  if (f) {
    section('FLOW CONTROL', [
      table(['keys', 'paused', 'held by owners', 'waiting', 'in flight'], [[f.keys, f.paused, f.held, f.waiting, f.in_flight]]),
      ...(f.top.length ? ['', table(['organization', 'key', 'waiting', 'in flight', 'paused'], f.top.map((k) => [k.org_id, k.key, k.waiting, k.in_flight, k.paused ? 'yes' : 'no']))] : []),
    ].join('\n'));
  }
  section('PROCESSES', r.processes.length === 0
    ? 'none answered'
    : table(['instance', 'roles', 'pid', 'host', 'uptime', 'split serve'],
      r.processes.map((p) => [p.instance, p.roles.length ? p.roles.join(',') : '(parent)', String(p.pid), p.host, duration(p.uptime_seconds), p.group])));
  if (r.errors.length) section('ERRORS', table(['part', 'error'], r.errors.map((e) => [e.part, e.message])));
  return `${out.join('\n')}\n`;
}
