import type { Envelope } from '../envelope.ts';

export interface MonitorSpec {
  name: string;
  schedule_type: 'interval' | 'cron';
  interval_seconds: number | null;
  cron_expression: string | null;
  timezone: string;
  grace_period_seconds: number;
  /** A started run not ended after this long takes the monitor down (`too_long`); null: `grace_period_seconds`. */
  max_duration_seconds: number | null;
  /** A run that ends in success faster than this takes the monitor down (`too_fast`); null: no lower bound. */
  min_duration_seconds: number | null;
  /** The monitor's name in `{root}/ping/<ping_key>/<slug>`; unique in the organization. */
  slug: string | null;
  enabled: boolean;
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  /** The organization's channels this resource notifies: null (or absent, before channels) = every one, [] = none. */
  channels?: string[] | null;
  on_failure_url: string | null;
  on_recovery_url: string | null;
  /** The caller's key when the monitor is managed by PUT /sync. */
  sync_key: string | null;
}

export type MonitorStatus = 'new' | 'up' | 'down' | 'paused';

/** Why a monitor is down (the contract's `down_reason`). */
export type DownReason = 'missed' | 'failed' | 'exit_status' | 'too_long' | 'too_fast';

/** A started run not ended yet: a `/start` ping waiting for its end. */
export interface OpenRun {
  rid: string | null;
  /** The `/start` ping's id. */
  ping_id: string;
  started_at: string;
  /** When the run is too long (start + max_duration, else + grace; scaled). */
  limit_at: string;
  /** Already took the monitor down as `too_long`: its end still gets a duration, its limit no longer counts. */
  overdue: boolean;
}

export interface Monitor extends MonitorSpec {
  id: string;
  org_id: string;
  token: string;
  status: MonitorStatus;
  /** Why it is down; null unless `status` is `down`. */
  down_reason: DownReason | null;
  paused: boolean;
  last_ping_at: string | null;
  /** When the next ping is due; the monitor goes down as `missed` at `late_at` (this + grace). */
  next_expected_at: string | null;
  late_at: string | null;
  /** The runs started and not ended, oldest first (at most {@link MAX_OPEN_RUNS}). */
  runs: OpenRun[];
  /** The next moment the monitor goes down without another ping: the earlier of `late_at` and the open runs' limits. */
  deadline_at: string | null;
  created_at: string;
  updated_at: string;
}

/** Kinds of ping (`/`, `/start`, `/fail`, `/log`, `/<exit status>`). */
export type PingKind = 'success' | 'start' | 'fail' | 'log' | 'exit';

export interface PingRecord {
  id: string;
  received_at: string;
  kind: PingKind;
  /** `/<0-255>`: the exit status; null for the other kinds. */
  exit_status: number | null;
  rid: string | null;
  /** On an end that closed a start: wall-clock milliseconds from the start. */
  duration_ms: number | null;
  method: string;
  source_ip: string | null;
  user_agent: string | null;
  body: string;
}

/** What the API received: the URL's suffix and `rid` as given, read by the decider. */
export interface PingRequest {
  id: string;
  received_at: string;
  /** The path segment after the monitor (`start`, `fail`, `log`, `0`…`255`), null for none. */
  suffix: string | null;
  rid: string | null;
  method: string;
  source_ip: string | null;
  user_agent: string | null;
  body: string;
}

export type MonitorEvent =
  | Envelope<'MonitorCreated', { monitor: Monitor }>
  | Envelope<'MonitorUpdated', { monitor: Monitor; changed: string[] }>
  | Envelope<'MonitorDeleted', { monitor: Monitor }>
  | Envelope<'MonitorPaused', { monitor: Monitor }>
  | Envelope<'MonitorResumed', { monitor: Monitor }>
  /** A ping that did not take the monitor down: a success, a start, a log line. */
  | Envelope<'MonitorPinged', { monitor: Monitor; ping: PingRecord; previous_status: MonitorStatus }>
  /** A failing ping (`ping`), a missed deadline or a run too long (`run`: the run that was). */
  | Envelope<'MonitorWentDown', { monitor: Monitor; reason: DownReason; ping?: PingRecord; run?: OpenRun }>
  /**
   * The monitor unchanged, as its latest event left it, written again by its partition's
   * owner in a newer commit: no ping, no change, nothing for a read model or a
   * notification. It exists so a takeover reads the partition's commits back only a
   * bounded way (`HeldMonitors.restates`); `restated_seq` is where the event it repeats is.
   */
  | Envelope<'MonitorRestated', { monitor: Monitor; restated_seq: number }>;

export const MONITOR_EVENT_TYPES: ReadonlySet<string> = new Set<MonitorEvent['type']>([
  'MonitorCreated', 'MonitorUpdated', 'MonitorDeleted', 'MonitorPaused', 'MonitorResumed', 'MonitorPinged', 'MonitorWentDown', 'MonitorRestated',
]);

export type MonitorInput = Partial<MonitorSpec>;

export const MONITOR_DEFAULTS: Omit<MonitorSpec, 'name' | 'schedule_type'> = {
  interval_seconds: null,
  cron_expression: null,
  timezone: 'UTC',
  grace_period_seconds: 300,
  max_duration_seconds: null,
  min_duration_seconds: null,
  slug: null,
  enabled: true,
  notify_on_failure: null,
  notify_on_recovery: null,
  on_failure_url: null,
  on_recovery_url: null,
  sync_key: null,
};

/** Open runs kept per monitor; a start past this drops the oldest (it closes nothing and is never too long). */
export const MAX_OPEN_RUNS = 50;
/** Bytes of a ping's body kept (the contract's 100 KB). */
export const PING_BODY_LIMIT = 100 * 1024;
export const SLUG_PATTERN = /^[a-z0-9_-]{1,100}$/;
