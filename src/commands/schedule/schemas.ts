import { agree, ChannelIds, Body, Bool, Int, Nullable, OneOf, Opt, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';
import { methodSchema } from '../task/schemas.ts';

/** The run that disabled a destination (destination health); shared with the endpoint's schemas. */
export const finalRun = Type.Object({
  id: Str(), status: Str(), status_code: Nullable(Int()), error_message: Nullable(Str()), attempt: Int(), scheduled_for: Time(), finished_at: Time(),
}, { description: 'The run that disabled it, as its notification shows it' });

/** A destination's run of final failures (destination health); shared with the endpoint's schemas. */
export const failureStreak = Type.Object({
  failing_since: Nullable(Time('The first final failure of the run; null: not failing')),
  consecutive_failures: Int(),
  counted_seq: Int('EVENTS sequence of the last result counted (a result at or below it is not counted again)'),
}, { description: 'Destination health: the current run of final failures; absent: none counted yet' });

const scheduleSchema = Type.Object({
  id: Str('`sch_…`'),
  org_id: Str(),
  name: Str(),
  url: Str(),
  cron: Str(),
  timezone: Str(),
  method: methodSchema,
  headers: StringMap(),
  body: Body(),
  timeout_ms: Int(),
  retry_attempts: Int(),
  enabled: Bool(),
  notify_on_failure: Nullable(Bool()),
  notify_on_recovery: Nullable(Bool()),
  expected_status_codes: Nullable(Str()),
  script: Nullable(Str()),
  sync_key: Nullable(Str('The caller\'s key when managed by PUT /sync')),
  created_at: Time(),
  updated_at: Time(),
  channels: ChannelIds(),
  next_run_at: Nullable(Time('The next tick (null while disabled)')),
  missed_ticks: Opt(Int('Ticks that came due while nothing could run them and were skipped; absent = 0')),
  disabled_reason: Opt(Nullable(OneOf(['failing'] as const, 'Why the service turned it off (destination health); null or absent: it did not'))),
  health: Opt(failureStreak),
}, { description: 'The schedule as the event left it' });

const plannedRun = Type.Object({ id: Str('The execution id'), scheduled_for: Time(), callback_url: Nullable(Str()) });

export const SCHEDULE_EVENT_SCHEMAS = {
  ScheduleCreated: Type.Object({ schedule: scheduleSchema }),
  ScheduleUpdated: Type.Object({ schedule: scheduleSchema, changed: Type.Array(Str()) }),
  ScheduleDeleted: Type.Object({ schedule: scheduleSchema }),
  ScheduleTriggered: Type.Object({
    schedule: scheduleSchema, execution: plannedRun, retry_of: Opt(Str('A retry of this execution of the schedule (`POST /executions/{id}/retry`)')),
    source_seq: Opt(Int('Appended outside the schedule\'s subject (a bulk job\'s group): the stream sequence of the schedule\'s state it carries; a later change or delete of the schedule wins')),
  }, { description: 'A run now, besides the ticks; with `retry_of`, a retry of one of its executions' }),
  ScheduleTicked: Type.Object({
    schedule: scheduleSchema, execution: plannedRun, next_run_at: Time(),
    missed: Opt(Int('Older ticks skipped before this one (it ran late, after an outage)')),
  }, { description: 'A cron tick fired: one execution, its id derived from the tick' }),
  ScheduleTicksMissed: Type.Object({ schedule: scheduleSchema, missed: Int('Ticks skipped'), next_run_at: Time() }, { description: 'Ticks came due while nothing could run them, the latest over an hour ago: all skipped, none runs' }),
  ScheduleFailureCounted: Type.Object({ schedule: scheduleSchema, execution_id: Str() }, { description: 'Destination health: an execution ended failed or timed out after its last attempt' }),
  ScheduleFailuresReset: Type.Object({ schedule: scheduleSchema, execution_id: Str() }, { description: 'Destination health: an execution succeeded after failures; the count starts again' }),
  ScheduleDisabled: Type.Object({ schedule: scheduleSchema, execution_id: Str('The failure that disabled it'), reason: OneOf(['failing'] as const), execution: Opt(finalRun) }, { description: 'Destination health: failing for `auto_disable_after` and at least 3 times in a row, turned off' }),
};
agree<Disagreeing<typeof SCHEDULE_EVENT_SCHEMAS>>();
