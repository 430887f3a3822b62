import { idempotencyKeyParameter } from './idempotency.ts';
import { EXECUTION_STATUSES, LIST_LIMIT } from './routes/executions.ts';
import { SOURCE_TYPES } from './execution-filter.ts';
import { errorSchema } from './schemas/common.ts';
import { REQUEST_SCHEMAS, type RequestSchemaName } from './schemas/index.ts';
import { liveMessageSchema } from './schemas/live.ts';
import { createChannelSchema, testChannelSchema, updateChannelSchema } from './schemas/channel.ts';
import { KEEP_ALIVE_MS } from '../live/feeds.ts';

// Built from the very schema objects that validate requests, so the document cannot drift.
// test/openapi.e2e.test.ts checks it against the OpenAPI 3.1 schema and the app's routes.
function strip(schema: object): object {
  const { $id: _id, ...rest } = schema as Record<string, unknown>;
  return rest;
}

const json = (ref: string) => ({ content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } } });
const errors = { default: { description: 'Error', ...json('Error') } };
const SUCCESS: Record<string, string> = { 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No content' };

const pathId = (name: string, description: string) => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const query = (name: string, description: string, schema: object, required = false) => ({ name, in: 'query', required, description, schema });

// Written out in every operation rather than referenced, so a reader needs no $ref resolution.
const parameters = {
  Id: pathId('id', 'The resource id (`tsk_…`, `sch_…`, `mon_…`, `ep_…`, `chn_…`, `exe_…`, `rjb_…`)'),
  EventId: pathId('event_id', 'The inbound event id (`evt_…`)'),
  Limit: query('limit', 'At most this many, newest first', { type: 'integer', minimum: 1, maximum: LIST_LIMIT.max, default: LIST_LIMIT.fallback }),
  Offset: query('offset', 'Skip this many', { type: 'integer', minimum: 0, default: 0 }),
  Status: query('status', 'Only executions with this status', { type: 'string', enum: EXECUTION_STATUSES }),
  TaskId: query('task_id', 'Only executions of this task, schedule, monitor or endpoint', { type: 'string' }),
  Since: query('since', 'Scheduled at or after: an ISO 8601 timestamp, or a duration such as `24h` meaning that long ago', { type: 'string' }),
  Until: query('until', 'Scheduled at or before: an ISO 8601 timestamp, or a duration such as `30m` meaning that long ago', { type: 'string' }),
  Dead: query('dead', 'Dead letters only (`true`): failed or timed out after the last attempt, and no retry replaced it', { type: 'string', enum: ['true', 'false'] }),
  SourceType: query('source_type', 'Only executions of this kind of source', { type: 'string', enum: [...SOURCE_TYPES] }),
  ScheduleId: query('schedule_id', "Only this schedule's executions", { type: 'string' }),
  EndpointId: query('endpoint_id', "Only this endpoint's deliveries", { type: 'string' }),
  LaneFilter: query('lane', 'Only executions of the live tasks of this lane', { type: 'string' }),
  Host: query('host', "Only executions whose target's host name is this (case-insensitive)", { type: 'string' }),
  StatusCode: query('status_code', 'Only these response codes: comma-separated codes and classes, e.g. `500,502`, `4xx`, `429,5xx`', { type: 'string' }),
  Error: query('error', 'Only executions whose error_message contains this (case-insensitive)', { type: 'string' }),
  FinishedAfter: query('finished_after', 'Finished at or after: ISO 8601, or a duration such as `7d` meaning that long ago', { type: 'string' }),
  FinishedBefore: query('finished_before', 'Finished at or before: ISO 8601, or a duration such as `1h` meaning that long ago', { type: 'string' }),
  Lane: query('lane', 'The lane whose live tasks are cancelled', { type: 'string', minLength: 1 }, true),
  IdempotencyKey: idempotencyKeyParameter,
};
type ParameterName = keyof typeof parameters;

/** The ping URLs: outside the API (no key), Healthchecks-compatible. */
const PINGS =
  'A monitor answers HEAD, GET or POST at `{root}/ping/<token>` (`ping_url`) and, when it has a `slug`, at `{root}/ping/<ping_key>/<slug>`, ' +
  'each with the suffixes `/start`, `/fail`, `/log` and `/<exit status 0-255>` and an optional `?rid=<uuid>` that ties a start to its end. ' +
  '`?create=1` on a name URL creates the monitor (interval, daily, grace 1 h) and answers 201. Answers: 200 `{monitor, status}` with `Ping-Body-Limit: 102400`; ' +
  '400 (exit status above 255, rid not a UUID), 404, 405, 410 (paused or disabled). A POST body is kept (first 100 KB). ' +
  '`max_duration_seconds`: a run started and not ended that long is down (`too_long`; unset: the grace period); `min_duration_seconds`: a success faster than that is down (`too_fast`). ' +
  'Responses add `status`, `down_reason` (missed, failed, exit_status, too_long, too_fast; null unless down), `ping_url`, `last_ping_at`, `next_expected_at`.';
/** Destination health (CONTRACT.md): what auto-disable does and how a forward URL comes back. */
const HEALTH =
  'A schedule, or one forward URL of an endpoint, whose executions ended `failed`/`timeout` after their last attempt, with no success in between, ' +
  'for at least the organization\'s `auto_disable_after` (`PUT /organization`, default `5d`, null = never) and at least 3 times in a row is disabled: ' +
  'a schedule gets `enabled: false` and `disabled_reason: "failing"` (`PUT` with `enabled: true` clears it); a forward URL gets `status: "disabled"` in the endpoint\'s ' +
  '`forward_health` (`[{url, status, failing_since, consecutive_failures, disabled_at}]`), and its deliveries are cancelled unsent while events are still stored. ' +
  'This call makes the URL active again (its count starts over; an active URL stays as it is). With `recover_since` (ISO 8601, or a duration such as `7d` meaning that long ago) it also accepts a replay job ' +
  '(as `POST /endpoints/{id}/events/replay`, `forward_urls: [url]`) of the endpoint\'s events of the last 30 days received since then that had a delivery to the URL and none that succeeded or is still pending. ' +
  'Answers 200 `{data: {endpoint, job}}`: the endpoint with its `forward_health`, and the job (`rjb_…`, `kind: "replay"`) or null without `recover_since`. ' +
  'A URL not among `forward_urls`: 422 `field: "url"`; another organization\'s endpoint: 404; another job running: 409 (the URL is enabled all the same).';
const PING_KEY_ROTATE = 'Answers `{data: {ping_key}}`. `GET /organization` shows the current `ping_key` (`ppk_` + 22 lower-case letters and digits).';

interface OpOptions {
  /** A longer text than the summary. */
  description?: string;
  /** The component schema of the JSON request body (one of REQUEST_SCHEMAS). */
  body?: RequestSchemaName;
  /** The body may be left out (a trigger: `{}` then). */
  bodyOptional?: boolean;
  /** The success status. */
  ok?: '200' | '201' | '202' | '204';
  params?: ParameterName[];
  /** No API key needed. */
  open?: boolean;
}

const op = (summary: string, { body, bodyOptional = false, ok = '200', params = [], open = false, description }: OpOptions = {}) => ({
  summary,
  ...(description ? { description } : {}),
  security: open ? [] : [{ bearer: [] }],
  ...(params.length ? { parameters: params.map((name) => parameters[name]) } : {}),
  ...(body ? { requestBody: { required: !bodyOptional, ...json(body) } } : {}),
  responses: { [ok]: { description: SUCCESS[ok]! }, ...errors },
});

/** Path parameters belong to the path item: every operation under it shares them. */
const withId = { parameters: [parameters.Id] };
const withKey = { parameters: [pathId('key', 'The flow-control key as tasks name it (URL-encoded)')] };

const FLOW_CONTROL =
  'A task (or a batch) with `flow_control: {key, parallelism?, rate?, period?}` runs under its key: at most `parallelism` executions of the key in flight at once, ' +
  'at most `rate` attempts started in any window of `period` (sliding; default 1s; wall clock), across every task naming the key. The latest create or update naming a key sets its limits. ' +
  'Waiting executions stay `pending` and start in order of `scheduled_for`; a retry waiting for its time holds no slot. A task sets `lane` or `flow_control`, not both; ' +
  'a batch\'s tasks may each name one in the batch\'s lane (the lane\'s next starts only when its key has a free slot and room in its rate). ' +
  'Each item: `{key, parallelism, rate, period, waiting, in_flight, paused}`; `waiting` and `in_flight` come from the partition owners\' memory.';
const CHANNELS =
  'Kinds and their `config`: email {to}; webhook {url} (the organization webhook\'s JSON and signing); slack, mattermost, google_chat, discord, teams {webhook_url}; ' +
  'telegram {bot_token, chat_id, api_url?}; ntfy {server_url?, topic, token?}; pagerduty {routing_key, api_url?}; opsgenie {api_key, region?, api_url?}; ' +
  'pushover {app_token, user_key, api_url?}; gotify {server_url, app_token}. Secrets are write-only and shown as *** and their last 4 characters. ' +
  '`events` (null = all) chooses what the channel hears; a resource\'s `channels` (null = every channel) chooses which channels hear about it. ' +
  'Responses add `last_delivery: {at, ok, status_code, error}` (a test counts).';
const withEvent = { parameters: [parameters.Id, parameters.EventId] };
const history = { params: ['Limit'] as ParameterName[] };

export function openApiDocument(serverUrl: string) {
  return {
    openapi: '3.1.0',
    info: { title: 'jetcron API', version: '1' },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'pk_….sk_… API key' } },
      schemas: {
        ...Object.fromEntries(Object.entries(REQUEST_SCHEMAS).map(([name, schema]) => [name, strip(schema)])),
        LiveMessage: liveMessageSchema,
        Error: errorSchema,
      },
    },
    paths: {
      '/openapi.json': { get: op('This document', { open: true }) },
      '/tasks': {
        get: op('List tasks'),
        post: op('Create a task', { body: 'CreateTask', ok: '201', params: ['IdempotencyKey'] }),
        delete: op('Cancel every live task of a lane', { params: ['Lane'] }),
      },
      '/tasks/{id}': { ...withId, get: op('Get a task'), put: op('Update a task', { body: 'UpdateTask' }), delete: op('Delete a task and its history', { ok: '204' }) },
      '/tasks/{id}/trigger': { ...withId, post: op('Run a task now', { body: 'TriggerTask', bodyOptional: true, ok: '202' }) },
      '/tasks/{id}/executions': { ...withId, get: op('Task execution history', history) },
      '/executions': {
        get: op('List executions: rows add `retry_of` and `retried_by`', {
          params: ['Limit', 'Offset', 'Status', 'TaskId', 'Since', 'Until', 'Dead', 'SourceType', 'ScheduleId', 'EndpointId', 'LaneFilter', 'Host', 'StatusCode', 'Error', 'FinishedAfter', 'FinishedBefore'],
        }),
      },
      '/executions/{id}': { ...withId, get: op('Get an execution with its attempts') },
      '/executions/retry': {
        post: op('Bulk retry: count (dry_run: 200 {data: {count}}) or retry every execution the filter matches, as a job (202 {data: job})', {
          body: 'BulkRetry', ok: '202', params: ['IdempotencyKey'],
          description: 'The filter is the list\'s (`dead` defaults to true). The set is fixed when the job is accepted: the matching executions then, oldest first, at most 10,000 (more: 422 `field: "filter"` naming the count). ' +
            'Each is retried once, as `POST /executions/{id}/retry` would; one that no longer qualifies (already retried, source gone) is skipped. One running job per organization (another: 409). ' +
            'A job is `{id: "rjb_…", kind: "retry", status: "running"|"done"|"cancelled", filter, total, done, skipped, created_at, finished_at}`.',
        }),
      },
      '/executions/{id}/retry': {
        ...withId,
        post: op('Retry a finished execution as its source runs now: answers {execution_id, status: "pending", retry_of}', {
          ok: '202',
          description: 'The new execution sends what its source sends today (a task\'s or schedule\'s current request; an endpoint delivery: the stored inbound request to the same forward URL through the endpoint\'s current scripts), signed afresh, attempts from 1. Pending or running: 409. Source gone: 409 `field: "source"`.',
        }),
      },
      '/tasks/batch': { post: op('Create up to 1,000 tasks of one lane, all or nothing', { body: 'CreateBatch', ok: '201', params: ['IdempotencyKey'] }) },
      '/schedules': { get: op('List schedules'), post: op('Create a cron schedule', { body: 'CreateSchedule', ok: '201', params: ['IdempotencyKey'] }) },
      '/schedules/{id}': { ...withId, get: op('Get a schedule'), put: op('Update a schedule', { body: 'UpdateSchedule' }), delete: op('Delete a schedule and its history', { ok: '204' }) },
      '/schedules/{id}/trigger': { ...withId, post: op('Run a schedule now', { body: 'TriggerTask', bodyOptional: true, ok: '202' }) },
      '/schedules/{id}/executions': { ...withId, get: op('Schedule execution history', history) },
      '/monitors': { get: op('List heartbeat monitors'), post: op('Create a heartbeat monitor', { body: 'CreateMonitor', ok: '201', description: PINGS }) },
      '/monitors/{id}': { ...withId, get: op('Get a monitor with its ping_url'), put: op('Update a monitor', { body: 'UpdateMonitor' }), delete: op('Delete a monitor and its pings', { ok: '204' }) },
      '/monitors/{id}/pause': { ...withId, post: op('Pause a monitor (pings answer 410)') },
      '/monitors/{id}/resume': { ...withId, post: op('Resume a monitor') },
      '/monitors/{id}/pings': { ...withId, get: op('Ping history: id, received_at, kind (success, start, fail, log, exit), exit_status, rid, duration_ms (an end that closed a start), method, source_ip, user_agent, body (first 100 KB)', history) },
      '/sync': { put: op('Declare schedules and monitors by key', { body: 'Sync' }) },
      '/scripts/test': { post: op('Run one Lua hook as the service would, storing nothing (Pro): answers {result, logs, duration_ms, error}', { body: 'ScriptTest' }) },
      '/endpoints': { get: op('List endpoints'), post: op('Create an endpoint', { body: 'CreateEndpoint', ok: '201', params: ['IdempotencyKey'] }) },
      '/endpoints/{id}': { ...withId, get: op('Get an endpoint with its inbound_url'), put: op('Update an endpoint', { body: 'UpdateEndpoint' }), delete: op('Delete an endpoint and its inbound events', { ok: '204' }) },
      '/endpoints/{id}/pause': { ...withId, post: op('Pause delivery (events are stored and held)') },
      '/endpoints/{id}/resume': { ...withId, post: op('Resume delivery (held events go out in order)') },
      '/endpoints/{id}/events': { ...withId, get: op('Inbound events of the last 30 days, newest first', history) },
      '/endpoints/{id}/events/{event_id}': { ...withEvent, get: op('One inbound event with its stored request') },
      '/endpoints/{id}/events/replay': {
        ...withId,
        post: op('Bulk replay of inbound events by filter, as a job (dry_run: 200 {data: {count}})', {
          body: 'BulkReplay', ok: '202', params: ['IdempotencyKey'],
          description: 'The endpoint\'s inbound events of the last 30 days matching the filter, oldest first, at most 10,000 (more: 422 `field: "filter"`), each replayed once through the endpoint\'s current scripts to `forward_urls` (default all), ' +
            'each new delivery `retry_of` the event\'s previous delivery to that URL. The job is the bulk retry\'s (`kind: "replay"`, with `endpoint_id` and `forward_urls`); one running job per organization.',
        }),
      },
      '/endpoints/{id}/forwards/enable': {
        ...withId,
        post: op('Make a forward URL that destination health disabled active again, optionally replaying what it missed', {
          body: 'EnableForward',
          description: HEALTH,
        }),
      },
      '/endpoints/{id}/events/{event_id}/replay': { ...withEvent, post: op('Forward the stored request again', { ok: '202' }) },
      '/channels': { get: op('List notification channels'), post: op('Create a notification channel', { body: 'CreateChannel', ok: '201', description: CHANNELS }) },
      '/channels/{id}': { ...withId, get: op('Get a channel'), put: op('Update a channel: the fields it names; config values given replace the stored ones', { body: 'UpdateChannel' }), delete: op('Delete a channel', { ok: '204' }) },
      '/channels/{id}/test': { ...withId, post: op('Send the channel a test message now: answers {ok, status_code, error} with what the receiver said', { body: 'TestChannel', bodyOptional: true }) },
      '/flow-control': {
        get: op("The organization's flow-control keys: limits, what waits and runs now, pause", { description: FLOW_CONTROL }),
      },
      '/flow-control/{key}': { ...withKey, get: op('One flow-control key (404 when no task named it and it was never paused)') },
      '/flow-control/{key}/pause': { ...withKey, post: op('Pause a key: it starts nothing and keeps what waits (a key may be paused before any task names it)') },
      '/flow-control/{key}/resume': { ...withKey, post: op('Resume a key: what waits starts within its limits') },
      '/live': {
        get: {
          summary: "The organization's events as they happen (server-sent events)",
          description:
            'A stream that stays open until the client leaves; read it with `fetch` (the key goes in the Authorization header, which EventSource cannot send). ' +
            'It starts at the end of the event log (no backlog) and carries only this organization\'s events, each once the read models include it, ' +
            'so a GET of the resource it names shows the change. ' +
            'Each message is `event: <kind>` then `data: <a LiveMessage as JSON>` then a blank line; ids and states only, never bodies, headers or secrets. ' +
            `A comment line \`: keep-alive\` comes every ${KEEP_ALIVE_MS / 1000} s. ` +
            'An organization may hold a bounded number of feeds open on one server (JETCRON_LIVE_FEEDS_PER_ORG, default 20), and a server a bounded number in all (JETCRON_LIVE_FEEDS_MAX): past either, 429.',
          security: [{ bearer: [] }],
          responses: {
            200: {
              description: 'Server-sent events whose `data` is a LiveMessage (components/schemas/LiveMessage)',
              content: { 'text/event-stream': { schema: { type: 'string' }, example: 'event: task\ndata: {"type":"TaskCreated","kind":"task","id":"tsk_…","task_id":"tsk_…","execution_id":"exe_…","status":"pending","at":"2026-01-01T00:00:00.000Z"}\n\n' } },
            },
            429: { description: 'Too many live feeds open (this organization, or this server); see Retry-After', ...json('Error') },
            ...errors,
          },
        },
      },
      '/jobs': { get: op('Bulk retry jobs, newest first', { params: ['Limit'] }) },
      '/jobs/{id}': { ...withId, get: op('One bulk retry job with its progress (total, done, skipped)') },
      '/jobs/{id}/cancel': { ...withId, post: op('Cancel the running job (what it has not taken stays as it is); a job no longer running is answered as it is') },
      '/organization': { get: op('Get the organization'), put: op('Update notification settings and auto_disable_after (destination health)', { body: 'UpdateOrganization', description: HEALTH }) },
      '/organization/webhook-secret/rotate': { post: op('Rotate the webhook secret') },
      '/organization/ping-key/rotate': { post: op('Rotate the ping key: {root}/ping/<old key>/<slug> stops answering at once', { description: PING_KEY_ROTATE }) },
    },
  };
}
