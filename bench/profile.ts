/** Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by package / source file. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Table } from './stats.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export function where(url: string): string {
  if (!url) return '(native / V8)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/').slice(0, 2).join('/')}`;
  const src = url.indexOf('/src/');
  if (src !== -1) return url.slice(src + 1);
  const streams = url.indexOf('/streams/');
  if (streams !== -1) return url.slice(streams + 1);
  return url.replace(/^file:\/\//, '');
}

export interface ProfileSummary {
  file: string;
  /** Sampled time, idle included. */
  totalMs: number;
  busyMs: number;
  byFunction: Table;
  byWhere: Table;
  /** Each sample credited to the innermost jetcron source file on its stack (else its package). */
  byCaller: Table;
  /** Each sample credited to the outermost jetcron source file on its (synchronous) stack: the entry point that ran. */
  byEntry: Table;
}

/** The busiest profile in `dir` (the main thread; the others are loader/worker threads). */
export function summarizeBusiestProfile(dir: string, top = 20): ProfileSummary | undefined {
  let best: ProfileSummary | undefined;
  let names: string[] = [];
  try {
    names = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  } catch {
    return undefined;
  }
  for (const name of names) {
    const s = summarizeProfile(path.join(dir, name), top);
    if (!best || s.busyMs > best.busyMs) best = s;
  }
  return best;
}

/**
 * A span of the monotonic clock (µs, `process.hrtime` and V8's profile timestamps read the
 * same one) that a benchmark marked as one of its phases: only samples within it count.
 */
export interface PhaseWindow {
  fromUs: number;
  toUs: number;
}

export function summarizeProfile(file: string, top = 20, window?: PhaseWindow): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  // timeDeltas[i] is the time between sample i-1 and sample i; credit it to sample i-1's frame.
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const next = p.timeDeltas[i + 1] ?? 0;
    const id = p.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + next);
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const caller = new Map<string, number>();
  const entry = new Map<string, number>();
  const ours = (url: string) => url.startsWith('file://') && !url.includes('/node_modules/') && (url.includes('/src/') || url.includes('/streams/'));
  for (const [id, us] of self) {
    let inner: string | undefined;
    let outer: string | undefined;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at)?.callFrame.url ?? '';
      if (ours(url)) {
        inner ??= where(url);
        outer = where(url);
      }
    }
    const leaf = byId.get(id)?.callFrame;
    const none = leaf && leaf.functionName.startsWith('(') && !leaf.url ? leaf.functionName : `outside jetcron code: ${where(leaf?.url ?? '')}`;
    caller.set(inner ?? none, (caller.get(inner ?? none) ?? 0) + us);
    entry.set(outer ?? none, (entry.get(outer ?? none) ?? 0) + us);
  }
  const fn = new Map<string, number>();
  const loc = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const w = where(url);
    const key = `${functionName || '(anonymous)'}  ${w}${url ? `:${lineNumber + 1}` : ''}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const group = functionName.startsWith('(') && !url ? functionName : w;
    loc.set(group, (loc.get(group) ?? 0) + us);
  }
  const idle = loc.get('(idle)') ?? 0;
  const rows = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => [k, `${(us / 1000).toFixed(0)} ms`, `${((100 * us) / total).toFixed(1)}%`]);
  return {
    file,
    totalMs: total / 1000,
    busyMs: (total - idle) / 1000,
    byFunction: { headers: ['function (self time)', 'ms', 'share'], rows: rows(fn) },
    byWhere: { headers: ['package / source file (self time)', 'ms', 'share'], rows: rows(loc) },
    byCaller: { headers: ['innermost jetcron file on the stack (self time of everything below it)', 'ms', 'share'], rows: rows(caller) },
    byEntry: { headers: ['outermost jetcron file on the stack (the code the event loop resumed)', 'ms', 'share'], rows: rows(entry) },
  };
}
