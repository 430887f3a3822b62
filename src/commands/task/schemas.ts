import { agree, ChannelIds, Body, Bool, Int, Nullable, OneOf, Opt, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';
import { HTTP_METHODS } from '../payload-checks.ts';

export const flowControlSchema = Type.Object({
  key: Str('The flow-control key; an endpoint\'s is its id'),
  parallelism: Nullable(Int()),
  rate: Nullable(Int()),
  period: Str('A duration such as `1m`'),
});

export const methodSchema = OneOf(HTTP_METHODS);

const plannedExecution = Type.Object({
  id: Str('The execution id (`exe_…`)'),
  scheduled_for: Time(),
  callback_url: Nullable(Str('This execution\'s own callback; overrides the task\'s')),
}, { description: 'The execution the event plans' });

export const taskSchema = Type.Object({
  id: Str('`tsk_…`'),
  org_id: Str(),
  name: Str(),
  url: Str(),
  method: methodSchema,
  headers: StringMap(),
  body: Body(),
  delay: Nullable(Str()),
  run_at: Nullable(Time()),
  timeout_ms: Int(),
  retry_attempts: Int(),
  callback_url: Nullable(Str()),
  lane: Nullable(Str()),
  flow_control: Nullable(flowControlSchema),
  enabled: Bool(),
  notify_on_failure: Nullable(Bool()),
  notify_on_recovery: Nullable(Bool()),
  expected_status_codes: Nullable(Str()),
  expected_body_pattern: Nullable(Str()),
  on_failure_url: Nullable(Str()),
  on_recovery_url: Nullable(Str()),
  script: Nullable(Str()),
  debounce: Nullable(Str()),
  debounce_key: Nullable(Str()),
  created_at: Time(),
  updated_at: Time(),
  channels: ChannelIds(),
  pending_execution: Nullable(plannedExecution),
}, { description: 'The task as the event left it' });

const changed = Type.Array(Str(), { description: 'The fields the update named' });

export const TASK_EVENT_SCHEMAS = {
  TaskCreated: Type.Object({ task: taskSchema, execution: plannedExecution }, { description: 'A task was created with its first execution' }),
  TaskUpdated: Type.Object({ task: taskSchema, changed }),
  TaskDeleted: Type.Object({ task: taskSchema }),
  TaskCancelled: Type.Object({ task: taskSchema, reason: Str() }, { description: 'Soft delete by a bulk cancel of its lane: history kept, pending runs cancelled' }),
  TaskTriggered: Type.Object({
    task: taskSchema, execution: plannedExecution, retry_of: Opt(Str('A retry of this execution of the task (`POST /executions/{id}/retry`)')),
    source_seq: Opt(Int('Appended outside the task\'s subject (a bulk job\'s group): the stream sequence of the task\'s state it carries; a later change or delete of the task wins')),
  }, { description: 'A run now, besides the task\'s own; with `retry_of`, a retry of one of its executions' }),
};
agree<Disagreeing<typeof TASK_EVENT_SCHEMAS>>();
