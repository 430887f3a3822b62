import { agree, Bool, Int, Nullable, OneOf, Opt, Str, StringMap, Time, Type, type Disagreeing } from '../schema-kit.ts';
import type { ExecutionEvent } from './types.ts';

export const executionSourceSchema = Type.Object({
  type: OneOf(['task', 'schedule', 'endpoint', 'monitor'] as const),
  id: Str('The task, schedule, endpoint or monitor id'),
  name: Str(),
}, { description: 'What the execution runs for' });

const sentRequest = Type.Object({
  method: Str(),
  url: Str(),
  headers: StringMap('As sent; secret-looking values masked as "***"'),
  body: Nullable(Str('At most 256 KB; a body that is not UTF-8 is base64 (`body_encoding`)')),
  body_encoding: Opt(Type.Literal('base64')),
  body_truncated: Opt(Bool()),
});

const callbackJob = Type.Object({
  kind: Type.Literal('callback'),
  org_id: Str(),
  execution_id: Str(),
  source: executionSourceSchema,
  url: Str(),
  body: Str(),
  attempt: Int(),
}, { description: 'The callback delivery as sent, so a retry sends the same body' });

const inboundRef = Type.Object({
  event_id: Str('The inbound event'),
  seq: Int('Its request\'s sequence in INBOUND'),
  origin_seq: Int(),
}, { description: 'An endpoint delivery: where its request is' });

const lateMark = Type.Literal(true, {
  description: 'Recorded by a partition owner fenced after it sent (on the execution\'s own subject): history only, never the execution\'s state; the next owner adopts it (a copy with id `<id>.adopted` in its partition commits) when the execution still waited for that attempt',
});

/** One attempt as a partition owner builds it: what to send and how to judge the answer. */
export const attemptJobSchema = Type.Object({
  kind: Type.Literal('attempt'),
  org_id: Str(),
  execution_id: Str(),
  source: executionSourceSchema,
  attempt: Int(),
  max_attempts: Int('1 + retry_attempts'),
  scheduled_for: Time(),
  request: Type.Object({ url: Str(), method: Str(), headers: StringMap(), body: Nullable(Str()), timeout_ms: Int() }),
  expected_status_codes: Nullable(Type.Array(Int())),
  expected_body_pattern: Nullable(Str()),
  callback_url: Nullable(Str()),
  next_tick_at: Opt(Nullable(Time('A schedule\'s next tick: a retry that would land after it is skipped'))),
  lane: Nullable(Str()),
  script: Opt(Nullable(Str())),
  push_callback_url: Nullable(Str()),
  inbound: Opt(Type.Object({
    event_id: Str(), seq: Int(), origin_seq: Int(), method: Nullable(Str()), headers: Nullable(StringMap()), body: Nullable(Str()),
    script_error: Opt(Str()), script_logs: Opt(Type.Array(Str())),
  })),
}, { description: 'One attempt of an execution, as its partition owner built it' });

const uncounted = Opt(Int('Attempts so far that answered 429 and used no retry (per-host backoff); absent = 0'));
const lane = Opt(Nullable(Str('The lane the execution held; released when it ends for good')));

export const EXECUTION_EVENT_SCHEMAS = {
  AttemptStarted: Type.Object({
    execution_id: Str(), source: executionSourceSchema, attempt: Int(), started_at: Time(), scheduled_for: Time(), uncounted_attempts: uncounted,
  }, { description: 'An attempt began: recorded by its partition owner at once for a retry, and for a first attempt only if it is still running after 500 ms' }),
  AttemptFinished: Type.Object({
    execution_id: Str(),
    source: executionSourceSchema,
    attempt: Int('1 for the first attempt'),
    status: OneOf(['success', 'failed', 'timeout'] as const),
    status_code: Nullable(Int()),
    error_message: Nullable(Str()),
    scheduled_for: Time(),
    started_at: Time(),
    finished_at: Time(),
    duration_ms: Int(),
    request: sentRequest,
    response_body: Nullable(Str()),
    response_body_encoding: Opt(Type.Literal('base64', { description: 'The body is not storable as text; absent = utf8' })),
    response_truncated: Bool(),
    response_headers: Nullable(StringMap()),
    script_logs: Type.Array(Str()),
    next_attempt_at: Nullable(Time('Set when another attempt follows (the execution stays pending); null: this attempt was the last')),
    final: Bool('This attempt ended the execution: no other attempt follows (version 2; version 1 events get it from `next_attempt_at`)'),
    callback_url: Nullable(Str()),
    push_callback_url: Nullable(Str()),
    lane,
    uncounted_attempts: uncounted,
    inbound: Opt(inboundRef),
    late: Opt(lateMark),
  }, { description: 'An attempt ended: its request, response and outcome' }),
  AttemptDeferred: Type.Object({
    execution_id: Str(), source: executionSourceSchema, attempt: Int(),
    scheduled_for: Time('The block\'s end: when the attempt will run'),
    reason: Str(), host: Str('`hostname:port` of the target'), uncounted_attempts: uncounted,
  }, { description: 'An attempt not sent while its host was blocked for the organization' }),
  ExecutionCancelled: Type.Object({ execution_id: Str(), source: executionSourceSchema, reason: Str(), lane }, { description: 'An execution ended without (another) attempt' }),
  CallbackAttempted: Type.Object({
    execution_id: Str(), url: Str(), attempt: Int(), status_code: Nullable(Int()), error_message: Nullable(Str()), next_attempt_at: Nullable(Time()), job: callbackJob,
    late: Opt(lateMark),
  }, { description: 'A callback delivery was tried' }),
};
agree<Disagreeing<typeof EXECUTION_EVENT_SCHEMAS>>();
export type { ExecutionEvent };
