import { hostname } from 'node:os';
import { SUBJECTS } from '../../streams/subjects.ts';
import { askAll } from './ask-all.ts';
import type { Nats } from './connection.ts';

/** One live service process, as it describes itself. */
export interface ProcessInfo {
  /** The id it holds leases under (`<pid>-<hex>`). */
  instance: string;
  /** Its roles; empty for the parent of a split `serve`, which owns the embedded servers and restarts its children. */
  roles: string[];
  pid: number;
  host: string;
  /** The split `serve` it belongs to (the parent's instance id), or null for a process started on its own. */
  group: string | null;
  started_at: string;
  uptime_seconds: number;
  /** The monitor deadlines its monitor owners keep (armed, past due): an API process. */
  monitor_deadlines?: { armed: number; overdue: number };
}

/**
 * Answers roll calls on a core subject while the process runs. A request with many
 * answers instead of a heartbeat registry: nothing to expire, nothing stored, and a
 * process that is gone simply does not answer. Returns the stop function.
 */
export function answerRollCall(
  nats: Nats,
  me: { instance: string; roles: string[]; group: string | undefined; monitorDeadlines?: () => { armed: number; overdue: number } | null },
): () => void {
  const startedAt = Date.now();
  const sub = nats.nc.subscribe(SUBJECTS.rollCall, {
    callback: (_err, m) => {
      const info: ProcessInfo = {
        instance: me.instance, roles: me.roles, pid: process.pid, host: hostname(), group: me.group ?? null,
        started_at: new Date(startedAt).toISOString(), uptime_seconds: Math.round((Date.now() - startedAt) / 1000),
      };
      const deadlines = me.monitorDeadlines?.();
      if (deadlines) info.monitor_deadlines = deadlines;
      m.respond(JSON.stringify(info));
    },
  });
  return () => sub.unsubscribe();
}

/**
 * Every process that answers within `waitMs`: how many there are is unknown, so the
 * whole window is waited out, unless `stallMs` is given: then the call ends once no
 * answer has come for that long (at once when no process runs).
 */
export async function rollCall(nats: Nats, waitMs: number, stallMs?: number): Promise<ProcessInfo[]> {
  const out: ProcessInfo[] = [];
  await askAll<ProcessInfo>(nats, SUBJECTS.rollCall, '', stallMs ? { strategy: 'stall', stall: stallMs, maxWait: waitMs } : { strategy: 'timer', maxWait: waitMs }, (p) => void out.push(p));
  return out.sort((a, b) => a.host.localeCompare(b.host) || a.pid - b.pid);
}
