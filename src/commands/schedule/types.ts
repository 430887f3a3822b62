import type { Envelope } from '../envelope.ts';
import type { HttpMethod } from '../task/types.ts';
import type { FailureStreak, FinalRun } from '../destination-health.ts';

export interface ScheduleSpec {
  name: string;
  url: string;
  cron: string;
  timezone: string;
  method: HttpMethod;
  headers: Record<string, string>;
  body: string | Record<string, unknown> | unknown[] | null;
  timeout_ms: number;
  retry_attempts: number;
  enabled: boolean;
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  /** The organization's channels this resource notifies: null (or absent, before channels) = every one, [] = none. */
  channels?: string[] | null;
  expected_status_codes: string | null;
  script: string | null;
  /** The caller's key when the schedule is managed by PUT /sync. */
  sync_key: string | null;
}

export interface Schedule extends ScheduleSpec {
  id: string;
  org_id: string;
  created_at: string;
  updated_at: string;
  /** The tick the scheduler waits for (null while disabled). */
  next_run_at: string | null;
  /** Ticks that came due while nothing could run them and were skipped (`decide.ts`, "missed ticks"); absent = 0. */
  missed_ticks?: number;
  /** Why it was turned off by the service (`failing`: destination health); null or absent: it was not. */
  disabled_reason?: 'failing' | null;
  /** Its current run of final failures (`src/commands/destination-health.ts`); absent: none counted yet. */
  health?: FailureStreak;
}

export interface PlannedRun {
  id: string;
  scheduled_for: string;
  callback_url: string | null;
}

export type ScheduleEvent =
  | Envelope<'ScheduleCreated', { schedule: Schedule }>
  | Envelope<'ScheduleUpdated', { schedule: Schedule; changed: string[] }>
  | Envelope<'ScheduleDeleted', { schedule: Schedule }>
  /** `source_seq`: appended outside the schedule's subject (a bulk job's group), the sequence of the schedule's state it carries (as `TaskTriggered`'s). */
  | Envelope<'ScheduleTriggered', { schedule: Schedule; execution: PlannedRun; retry_of?: string; source_seq?: number }>
  /**
   * A cron tick fired: one execution; its id is derived from the tick, so two schedulers
   * make one. `missed`: older ticks skipped before it (it ran late, after an outage).
   */
  | Envelope<'ScheduleTicked', { schedule: Schedule; execution: PlannedRun; next_run_at: string; missed?: number }>
  /** Ticks came due while nothing could run them, the latest over an hour ago: all skipped, none runs. */
  | Envelope<'ScheduleTicksMissed', { schedule: Schedule; missed: number; next_run_at: string }>
  /** Destination health: an execution ended failed or timed out after its last attempt (counted once, `health.counted_seq`). */
  | Envelope<'ScheduleFailureCounted', { schedule: Schedule; execution_id: string }>
  /** Destination health: an execution succeeded after failures; the count starts again. */
  | Envelope<'ScheduleFailuresReset', { schedule: Schedule; execution_id: string }>
  /** Destination health: failing long enough and often enough, turned off (`enabled: false`, `disabled_reason: "failing"`). */
  | Envelope<'ScheduleDisabled', { schedule: Schedule; execution_id: string; reason: 'failing'; execution?: FinalRun }>;

export type ScheduleInput = Partial<ScheduleSpec>;

export const SCHEDULE_DEFAULTS: Omit<ScheduleSpec, 'name' | 'url' | 'cron'> = {
  timezone: 'UTC',
  method: 'GET',
  headers: {},
  body: null,
  timeout_ms: 30_000,
  retry_attempts: 5,
  enabled: true,
  notify_on_failure: null,
  notify_on_recovery: null,
  expected_status_codes: null,
  script: null,
  sync_key: null,
};

export const SCHEDULE_EVENT_TYPES: ReadonlySet<string> = new Set<ScheduleEvent['type']>([
  'ScheduleCreated', 'ScheduleUpdated', 'ScheduleDeleted', 'ScheduleTriggered', 'ScheduleTicked', 'ScheduleTicksMissed',
  'ScheduleFailureCounted', 'ScheduleFailuresReset', 'ScheduleDisabled',
]);
