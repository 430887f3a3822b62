import type { Envelope } from '../../events/envelope.ts';

export interface MonitorSpec {
  name: string;
  schedule_type: 'interval' | 'cron';
  interval_seconds: number | null;
  cron_expression: string | null;
  timezone: string;
  grace_period_seconds: number;
  enabled: boolean;
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  on_failure_url: string | null;
  on_recovery_url: string | null;
  /** The caller's key when the monitor is managed by PUT /sync. */
  sync_key: string | null;
}

export type MonitorStatus = 'new' | 'up' | 'down' | 'paused';

export interface Monitor extends MonitorSpec {
  id: string;
  org_id: string;
  token: string;
  status: MonitorStatus;
  paused: boolean;
  last_ping_at: string | null;
  /** When the next ping is due; the monitor goes down at `deadline_at` (this + grace). */
  next_expected_at: string | null;
  deadline_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface PingRecord {
  id: string;
  received_at: string;
  kind: 'ping' | 'fail';
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
  | Envelope<'MonitorPinged', { monitor: Monitor; ping: PingRecord; previous_status: MonitorStatus }>
  | Envelope<'MonitorWentDown', { monitor: Monitor; reason: 'missed' | 'fail_signal'; ping?: PingRecord }>;

export type MonitorInput = Partial<MonitorSpec>;

export const MONITOR_DEFAULTS: Omit<MonitorSpec, 'name' | 'schedule_type'> = {
  interval_seconds: null,
  cron_expression: null,
  timezone: 'UTC',
  grace_period_seconds: 300,
  enabled: true,
  notify_on_failure: null,
  notify_on_recovery: null,
  on_failure_url: null,
  on_recovery_url: null,
  sync_key: null,
};
