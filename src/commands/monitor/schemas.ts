import { agree, ChannelIds, Bool, Int, Nullable, OneOf, Opt, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';

const downReason = OneOf(['missed', 'failed', 'exit_status', 'too_long', 'too_fast'] as const, 'Why it is down');
const status = OneOf(['new', 'up', 'down', 'paused'] as const);

const openRun = Type.Object({
  rid: Nullable(Str()),
  ping_id: Str('The `/start` ping'),
  started_at: Time(),
  limit_at: Time('When the run is too long'),
  overdue: Bool('Already took the monitor down as `too_long`'),
}, { description: 'A run started and not ended yet' });

const monitorSchema = Type.Object({
  id: Str('`mon_…`'),
  org_id: Str(),
  token: Str('The ping URL\'s credential'),
  name: Str(),
  schedule_type: OneOf(['interval', 'cron'] as const),
  interval_seconds: Nullable(Int()),
  cron_expression: Nullable(Str()),
  timezone: Str(),
  grace_period_seconds: Int(),
  max_duration_seconds: Nullable(Int()),
  min_duration_seconds: Nullable(Int()),
  slug: Nullable(Str()),
  enabled: Bool(),
  notify_on_failure: Nullable(Bool()),
  notify_on_recovery: Nullable(Bool()),
  on_failure_url: Nullable(Str()),
  on_recovery_url: Nullable(Str()),
  sync_key: Nullable(Str()),
  status,
  down_reason: Nullable(downReason),
  paused: Bool(),
  last_ping_at: Nullable(Time()),
  next_expected_at: Nullable(Time()),
  late_at: Nullable(Time('Down as `missed` at this time without a ping')),
  runs: Type.Array(openRun),
  deadline_at: Nullable(Time('The earlier of `late_at` and the open runs\' limits')),
  created_at: Time(),
  updated_at: Time(),
  channels: ChannelIds(),
}, { description: 'The monitor as the event left it' });

const pingRecord = Type.Object({
  id: Str('`png_…`'),
  received_at: Time(),
  kind: OneOf(['success', 'start', 'fail', 'log', 'exit'] as const, 'Events stored before heartbeats said `ping`: read as `success`'),
  exit_status: Nullable(Int()),
  rid: Nullable(Str()),
  duration_ms: Nullable(Int('On an end that closed a start: milliseconds from the start')),
  method: Str(),
  source_ip: Nullable(Str()),
  user_agent: Nullable(Str()),
  body: Str('At most 100 KB'),
});

export const MONITOR_EVENT_SCHEMAS = {
  MonitorCreated: Type.Object({ monitor: monitorSchema }),
  MonitorUpdated: Type.Object({ monitor: monitorSchema, changed: Type.Array(Str()) }),
  MonitorDeleted: Type.Object({ monitor: monitorSchema }),
  MonitorPaused: Type.Object({ monitor: monitorSchema }),
  MonitorResumed: Type.Object({ monitor: monitorSchema }),
  MonitorPinged: Type.Object({ monitor: monitorSchema, ping: pingRecord, previous_status: status }, { description: 'A ping that did not take the monitor down: a success, a start, a log line' }),
  MonitorWentDown: Type.Object({
    monitor: monitorSchema,
    reason: OneOf(['missed', 'failed', 'exit_status', 'too_long', 'too_fast'] as const, 'Events stored before heartbeats said `fail_signal`: read as `failed`'),
    ping: Opt(pingRecord),
    run: Opt(openRun),
  }, { description: 'A failing ping, a missed deadline or a run too long (`run`) or too fast' }),
  MonitorRestated: Type.Object({ monitor: monitorSchema, restated_seq: Int('Where the event it repeats is') }, {
    description: 'The monitor unchanged, written again by its partition\'s owner so a takeover reads back a bounded way: nothing for a read model',
  }),
};
agree<Disagreeing<typeof MONITOR_EVENT_SCHEMAS>>();
