import { SLUG_PATTERN, type DownReason, type Monitor, type PingRecord } from './monitor/types.ts';
import type { Envelope } from './envelope.ts';
import type { EventType, JetcronEvent } from './events.ts';

/**
 * The one place where event shapes of the past become today's. Every reader decodes
 * stored messages through `eventsOf` (src/commands/commit.ts), which calls `upcast` on
 * each event: the projector, the owners, the deciders' loads, rebuild and replay all
 * see today's shapes only, so no reader keeps code for history.
 *
 * Versions: every event carries `v`, its type's schema version (written by every
 * appender through `storedEvent`/`eventJson`). An event stored without one is
 * version 1: the shapes older than heartbeats among those are
 * recognised by their fields (a monitor without `runs`, a ping of kind `ping`) and
 * rewritten here. When a type's shape changes, its entry in `VERSIONS` goes up and a
 * step from the version before is added to `STEPS`: readers never learn of it.
 */

/** Today's schema version of each type; a type not named is at 1. */
const VERSIONS: Partial<Record<EventType, number>> = {
  // 2: `final` (the attempt ended the execution), where readers worked it out from `next_attempt_at`.
  AttemptFinished: 2,
  // 2: `steps`, a group of executions per event, where version 1 recorded one beside `job`.
  RetryJobStepped: 2,
};

export const versionOf = (type: string): number => VERSIONS[type as EventType] ?? 1;

/** What the pre-heartbeats monitor events said `failed` with. */
type LegacyDownReason = DownReason | 'fail_signal';

const downReason = (reason: LegacyDownReason): DownReason => (reason === 'fail_signal' ? 'failed' : reason);

/**
 * A monitor as events written before heartbeats carried it: no duration limits, no open
 * runs, `late_at` = their `deadline_at`, a synced monitor's key as its slug, and why it is
 * down (from `reason` when the event is the going down, else `missed`: those events did
 * not say). Today's monitor (it has `runs`) is left alone.
 */
function legacyMonitor(m: Monitor, reason?: LegacyDownReason): Monitor {
  if (m.runs !== undefined) return m;
  return {
    ...m,
    max_duration_seconds: m.max_duration_seconds ?? null,
    min_duration_seconds: m.min_duration_seconds ?? null,
    slug: m.slug ?? (m.sync_key && SLUG_PATTERN.test(m.sync_key) ? m.sync_key : null),
    down_reason: m.status === 'down' ? (reason ? downReason(reason) : 'missed') : null,
    late_at: m.deadline_at,
    runs: [],
  };
}

/** Pings recorded before heartbeats: kind `ping` (a success), none of the exit status, run id or duration. */
function legacyPing(p: PingRecord): PingRecord {
  return { ...p, kind: (p.kind as string) === 'ping' ? 'success' : p.kind, exit_status: p.exit_status ?? null, rid: p.rid ?? null, duration_ms: p.duration_ms ?? null };
}

type Data = Record<string, unknown>;
const monitorData = (d: Data): Data => ({ ...d, monitor: legacyMonitor(d.monitor as Monitor) });

/** Version 1 events stored without `v`: the older shapes among them, made today's (each step returns its input when it is today's already). */
const UNVERSIONED: Partial<Record<EventType, (data: Data) => Data>> = {
  MonitorCreated: monitorData,
  MonitorUpdated: monitorData,
  MonitorDeleted: monitorData,
  MonitorPaused: monitorData,
  MonitorResumed: monitorData,
  MonitorRestated: monitorData,
  MonitorPinged: (d) => ({ ...monitorData(d), ping: legacyPing(d.ping as PingRecord) }),
  MonitorWentDown: (d) => {
    const reason = d.reason as LegacyDownReason;
    return { ...d, monitor: legacyMonitor(d.monitor as Monitor, reason), reason: downReason(reason), ...(d.ping ? { ping: legacyPing(d.ping as PingRecord) } : {}) };
  },
};

/** `STEPS[type][n]`: version n of the type's data → version n + 1. */
const STEPS: Partial<Record<EventType, Record<number, (data: Data) => Data>>> = {
  AttemptFinished: { 1: (d) => ({ ...d, final: d.next_attempt_at == null }) },
  RetryJobStepped: { 1: ({ job, execution_id, outcome, retry_id, reason }) => ({ job, steps: [{ execution_id, outcome, retry_id, reason }] }) },
};

/** The stored types a reader asking for `type` must look at (a renamed type would add its old name here). */
export const storedTypeNames = (type: EventType): string[] => [type];

export class UpcastError extends Error {}

/**
 * The event as today's readers know it, `v` included. An event at today's version is
 * returned as it is (no copy): the common case costs one comparison. A version newer
 * than this build knows is an error (a newer writer's event): the reader records it as
 * any event it cannot take.
 */
export function upcast(stored: Envelope): JetcronEvent {
  const event = stored as JetcronEvent & { v?: number };
  const today = versionOf(event.type);
  if (event.v === today) return event;
  let v = event.v ?? 1;
  if (!Number.isInteger(v) || v < 1) throw new UpcastError(`event ${event.id} (${event.type}) has a bad version ${String(event.v)}`);
  if (v > today) throw new UpcastError(`event ${event.id} is ${event.type} version ${v}; this build knows up to version ${today}`);
  let data = event.data as unknown as Data;
  if (event.v === undefined) data = UNVERSIONED[event.type]?.(data) ?? data;
  for (; v < today; v++) {
    const step = STEPS[event.type]?.[v];
    if (!step) throw new UpcastError(`no upcast of ${event.type} from version ${v}`);
    data = step(data);
  }
  return { ...event, v: today, data } as JetcronEvent;
}

/** The event as every appender stores it: with its type's version. */
export function storedEvent<E extends Envelope>(event: E): E & { v: number } {
  const v = versionOf(event.type);
  return (event as { v?: number }).v === v ? (event as E & { v: number }) : { ...event, v };
}

/** `JSON.stringify(storedEvent(event))`, without copying the event when it has no `v` yet. */
export function eventJson(event: Envelope): string {
  const v = versionOf(event.type);
  const own = (event as { v?: number }).v;
  if (own === undefined) {
    const text = JSON.stringify(event);
    return `${text.slice(0, -1)},"v":${v}}`;
  }
  return JSON.stringify(own === v ? event : { ...event, v });
}
