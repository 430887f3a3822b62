import { agree, Int, Nullable, OneOf, Opt, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';

const jobSchema = Type.Object({
  id: Str('`rjb_…`'),
  org_id: Str(),
  kind: OneOf(['retry', 'replay'] as const),
  endpoint_id: Opt(Str('A replay job\'s endpoint')),
  forward_urls: Opt(Nullable(Type.Array(Str(), { description: "A replay job's forward URLs; null: all of the endpoint's" }))),
  status: OneOf(['running', 'done', 'cancelled'] as const),
  filter: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean()]), { description: 'The filter as accepted' }),
  total: Int('How many executions the set holds'),
  done: Int('Retried so far'),
  skipped: Int('No longer qualifying when their turn came'),
  position: Int('The next execution of the set to take'),
  created_at: Time(),
  finished_at: Nullable(Time()),
}, { description: 'A bulk retry job as the event left it' });

export const JOB_EVENT_SCHEMAS = {
  RetryJobAccepted: Type.Object({
    job: jobSchema,
    execution_ids: Type.Array(Str(), { description: 'The set, fixed at acceptance, oldest first: the matching executions (a replay job: inbound events)' }),
  }, { description: 'A bulk retry (`POST /executions/retry`) or replay (`POST /endpoints/{id}/events/replay`) was accepted' }),
  RetryJobStepped: Type.Object({
    job: jobSchema,
    steps: Type.Array(Type.Object({
      execution_id: Str('The execution of the set this step took (a replay job: the inbound event)'),
      outcome: OneOf(['retried', 'skipped'] as const),
      retry_id: Nullable(Str('The new execution, when retried')),
      reason: Nullable(Str('Why it was skipped')),
    }), { description: 'The executions of the set from the job\'s position before this event, in order' }),
  }, { description: 'The job\'s worker took a group of executions of its set (version 1: one, its fields beside `job`)' }),
  RetryJobCancelled: Type.Object({ job: jobSchema }, { description: 'The job was cancelled (`POST /jobs/{id}/cancel`): what it had not taken stays as it is' }),
};

agree<Disagreeing<typeof JOB_EVENT_SCHEMAS>>();
