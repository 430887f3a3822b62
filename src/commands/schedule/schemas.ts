import { agree, Body, Bool, Int, Nullable, Str, StringMap, Time, Type, type Disagreeing } from '../../events/schema-kit.ts';
import { methodSchema } from '../task/schemas.ts';

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
  next_run_at: Nullable(Time('The next tick (null while disabled)')),
}, { description: 'The schedule as the event left it' });

const plannedRun = Type.Object({ id: Str('The execution id'), scheduled_for: Time(), callback_url: Nullable(Str()) });

export const SCHEDULE_EVENT_SCHEMAS = {
  ScheduleCreated: Type.Object({ schedule: scheduleSchema }),
  ScheduleUpdated: Type.Object({ schedule: scheduleSchema, changed: Type.Array(Str()) }),
  ScheduleDeleted: Type.Object({ schedule: scheduleSchema }),
  ScheduleTriggered: Type.Object({ schedule: scheduleSchema, execution: plannedRun }, { description: 'A run now, besides the ticks' }),
  ScheduleTicked: Type.Object({ schedule: scheduleSchema, execution: plannedRun, next_run_at: Time() }, { description: 'A cron tick fired: one execution, its id derived from the tick' }),
};
agree<Disagreeing<typeof SCHEDULE_EVENT_SCHEMAS>>();
