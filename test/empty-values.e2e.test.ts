// Every field of every request schema (src/http/schemas/index.ts, the registry the
// OpenAPI document is built from) sent with each empty value its type allows (`""`,
// `null`, `[]`), through the HTTP API of the real service: accepted with the default
// the spec and the contract give it, or 422 naming that field. A schema field that
// EXPECTED does not classify fails the walk, so a field added later is decided here
// before it ships, and a move of the rules cannot silently change one again.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { REQUEST_SCHEMAS, type RequestSchemaName } from '../src/http/schemas/index.ts';
import { startGateTarget } from './support/gate-target.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';

type Empty = '""' | 'null' | '[]';
const EMPTY: Record<Empty, unknown> = { '""': '', null: null, '[]': [] };

/** What an empty value gets: accepted (`stored`: what the resource then shows for the field), or refused with 422 naming the field. */
type Outcome = { accepted: true; stored?: unknown } | { accepted: false };
const ok = (stored?: unknown): Outcome => (stored === undefined ? { accepted: true } : { accepted: true, stored });
const refused: Outcome = { accepted: false };

interface Field {
  schema: RequestSchemaName;
  /** `tasks[].flow_control.parallelism`: `[]` is an array's item (the first is sent). */
  path: string;
  empties: Empty[];
}

type Schema = { type?: string | readonly string[]; anyOf?: readonly Schema[]; properties?: Record<string, Schema>; items?: Schema };

/** The types a value may have, through `anyOf` (nullable fields); no `type` at all takes any. */
function typesOf(s: Schema): Set<string> {
  const out = new Set<string>();
  if (s.anyOf) for (const branch of s.anyOf) for (const t of typesOf(branch)) out.add(t);
  else if (s.type === undefined) for (const t of ['string', 'null', 'array', 'object']) out.add(t);
  else for (const t of [s.type].flat()) out.add(t);
  return out;
}

/** The branch of a field that has named properties (an object, or an array of objects), if any. */
function nested(s: Schema): Schema | undefined {
  if (s.properties) return s;
  if (s.items?.properties) return s;
  for (const branch of s.anyOf ?? []) {
    const found = nested(branch);
    if (found) return found;
  }
  return undefined;
}

function walk(schema: RequestSchemaName, s: Schema, prefix: string, out: Field[]): void {
  for (const [name, prop] of Object.entries(s.properties ?? {})) {
    const path = prefix + name;
    const types = typesOf(prop);
    const empties = (['""', 'null', '[]'] as const).filter((e) => types.has(e === '""' ? 'string' : e === 'null' ? 'null' : 'array'));
    if (empties.length) out.push({ schema, path, empties });
    const inner = nested(prop);
    if (inner?.properties) walk(schema, inner, `${path}.`, out);
    else if (inner?.items?.properties) walk(schema, inner.items, `${path}[].`, out);
  }
}

const FIELDS: Field[] = [];
for (const [name, schema] of Object.entries(REQUEST_SCHEMAS)) walk(name as RequestSchemaName, schema as Schema, '', FIELDS);

// What the spec and the contract say an empty value means, field by field. A field
// whose absence means "none" (no lane, any 2xx, any body, no callback, no script, …)
// takes "" and null as none (stored null); a field with a format of its own (a
// duration, a time, a cron expression, a name, a key, a method) refuses "" with 422.
const NONE: Outcome = ok(null);
const STRING_NONE = { '""': NONE, null: NONE };
const NULL_NONE = { null: NONE };
const ANY_BODY = { '""': ok(''), null: NONE, '[]': ok([]) };
/** A field with a format of its own: "" refused, null (where its type allows it) none. */
const FORMAT = { '""': refused, null: NONE };
const REFUSED = { '""': refused };

/** A resource's notification channels: null = every channel of the organization, [] = none. */
const CHANNELS = { null: NONE, '[]': ok([]) };

const TASK_FIELDS = {
  channels: CHANNELS,
  url: REFUSED,
  name: REFUSED,
  method: REFUSED,
  body: ANY_BODY,
  delay: FORMAT,
  run_at: FORMAT,
  callback_url: STRING_NONE,
  lane: STRING_NONE,
  flow_control: NULL_NONE,
  'flow_control.key': REFUSED,
  'flow_control.parallelism': NULL_NONE,
  'flow_control.rate': NULL_NONE,
  'flow_control.period': { '""': refused, null: ok('1s') },
  notify_on_failure: NULL_NONE,
  notify_on_recovery: NULL_NONE,
  expected_status_codes: STRING_NONE,
  expected_body_pattern: STRING_NONE,
  on_failure_url: STRING_NONE,
  on_recovery_url: STRING_NONE,
  script: STRING_NONE,
  debounce: FORMAT,
  debounce_key: STRING_NONE,
};
const SCHEDULE_FIELDS = {
  channels: CHANNELS,
  url: REFUSED,
  cron: REFUSED,
  timezone: REFUSED,
  name: REFUSED,
  method: REFUSED,
  body: ANY_BODY,
  notify_on_failure: NULL_NONE,
  notify_on_recovery: NULL_NONE,
  expected_status_codes: STRING_NONE,
  script: STRING_NONE,
};
const MONITOR_FIELDS = {
  channels: CHANNELS,
  name: REFUSED,
  schedule_type: REFUSED,
  // Required for an interval monitor (the base is one).
  interval_seconds: { null: refused },
  cron_expression: FORMAT,
  timezone: REFUSED,
  max_duration_seconds: NULL_NONE,
  min_duration_seconds: NULL_NONE,
  slug: FORMAT,
  notify_on_failure: NULL_NONE,
  notify_on_recovery: NULL_NONE,
  on_failure_url: STRING_NONE,
  on_recovery_url: STRING_NONE,
};
const ENDPOINT_FIELDS = {
  channels: CHANNELS,
  name: REFUSED,
  // Collect-only: records events, forwards nothing.
  forward_urls: { '[]': ok([]) },
  // The spec: empty means the original is forwarded.
  forward_method: STRING_NONE,
  forward_headers: NULL_NONE,
  forward_body: STRING_NONE,
  on_failure_url: STRING_NONE,
  on_recovery_url: STRING_NONE,
  notify_on_failure: NULL_NONE,
  notify_on_recovery: NULL_NONE,
  script: STRING_NONE,
  secrets: { null: ok() },
  verification: NULL_NONE,
  'verification.type': REFUSED,
  'verification.secret': REFUSED,
  'verification.header': REFUSED,
  'verification.algorithm': REFUSED,
  'verification.encoding': REFUSED,
  'verification.prefix': { '""': ok() },
  flow_control: NULL_NONE,
  'flow_control.parallelism': NULL_NONE,
  'flow_control.rate': NULL_NONE,
  'flow_control.period': { '""': refused, null: ok('1s') },
};
const FLOW_KEY = {
  flow_control: NULL_NONE,
  'flow_control.key': REFUSED,
  'flow_control.parallelism': NULL_NONE,
  'flow_control.rate': NULL_NONE,
  'flow_control.period': { '""': refused, null: ok() },
};

const prefixed = (prefix: string, fields: Record<string, Partial<Record<Empty, Outcome>>>) =>
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [`${prefix}${k}`, v]));

const EXPECTED: Record<RequestSchemaName, Record<string, Partial<Record<Empty, Outcome>>>> = {
  CreateTask: TASK_FIELDS,
  UpdateTask: TASK_FIELDS,
  TriggerTask: { callback_url: { '""': ok(), null: ok() } },
  CreateBatch: {
    // A batch's lane groups it (the spec: required; or a flow-control key).
    lane: REFUSED,
    ...FLOW_KEY,
    tasks: { '[]': refused },
    'tasks[].url': REFUSED,
    'tasks[].method': REFUSED,
    'tasks[].body': { '""': ok(), null: ok(), '[]': ok() },
    'tasks[].name': REFUSED,
    // A task's own key (in the batch's lane, it waits for its lane and its key).
    ...prefixed('tasks[].', FLOW_KEY),
    method: REFUSED,
    run_at: REFUSED,
    delay: REFUSED,
    callback_url: { '""': ok(), null: ok() },
  },
  CreateSchedule: SCHEDULE_FIELDS,
  UpdateSchedule: SCHEDULE_FIELDS,
  CreateMonitor: MONITOR_FIELDS,
  UpdateMonitor: MONITOR_FIELDS,
  Sync: {
    // Declares none (with delete_removed, deletes every synced one).
    schedules: { '[]': ok() },
    'schedules[].key': REFUSED,
    'schedules[].name': REFUSED,
    'schedules[].url': REFUSED,
    'schedules[].method': REFUSED,
    'schedules[].cron': REFUSED,
    'schedules[].timezone': REFUSED,
    'schedules[].body': { '""': ok(), null: ok(), '[]': ok() },
    monitors: { '[]': ok() },
    'monitors[].key': REFUSED,
    'monitors[].name': REFUSED,
    'monitors[].schedule_type': REFUSED,
    'monitors[].cron_expression': REFUSED,
    'monitors[].timezone': REFUSED,
    'monitors[].slug': REFUSED,
  },
  // The hook's own input, as the caller gives it: empty texts are texts.
  ScriptTest: {
    script: REFUSED,
    hook: REFUSED,
    'request.method': { '""': ok() },
    'request.path': { '""': ok() },
    'request.query': { '""': ok() },
    'request.body': { '""': ok() },
    'request.source_ip': { '""': ok(), null: ok() },
    'response.status': { null: ok() },
    'response.body': { '""': ok() },
    'task.id': { '""': ok() },
    'task.name': { '""': ok() },
    'task.url': { '""': ok() },
    'task.method': { '""': ok() },
  },
  CreateEndpoint: ENDPOINT_FIELDS,
  UpdateEndpoint: ENDPOINT_FIELDS,
  // auto_disable_after: null is never; "" is no duration.
  UpdateOrganization: { notification_email: STRING_NONE, notification_webhook_url: STRING_NONE, auto_disable_after: { '""': refused, null: ok(null) } },
  // A channel's kind and name have formats of their own; `events: null` hears every event, [] none.
  CreateChannel: { kind: REFUSED, name: REFUSED, events: { null: NONE, '[]': ok([]) } },
  UpdateChannel: { kind: REFUSED, name: REFUSED, events: { null: NONE, '[]': ok([]) } },
  TestChannel: {},
  // A bulk retry's filter: an empty value is no filter (as an empty query parameter of the list).
  BulkRetry: Object.fromEntries(['status', 'since', 'until', 'task_id', 'source_type', 'schedule_id', 'endpoint_id', 'lane', 'host', 'status_code', 'error', 'finished_after', 'finished_before']
    .map((name) => [`filter.${name}`, { '""': ok() }])),
  // A bulk replay: an empty filter value is none; forward_urls null is all of them, [] none (refused: a replay to nowhere).
  BulkReplay: {
    'filter.received_after': { '""': ok() },
    'filter.received_before': { '""': ok() },
    'filter.delivery_status': { '""': ok() },
    'filter.method': { '""': ok() },
    forward_urls: { null: ok(), '[]': refused },
  },
  // The URL to enable must be one of the endpoint's; an empty recover_since is no replay.
  EnableForward: { url: { '""': refused }, recover_since: { '""': ok(), null: ok() } },
};

const OK_URL = 'http://127.0.0.1:9/never';
const NEVER = '0 0 1 1 *';
const TASK_KEY = { key: 'empty-values', parallelism: 2, rate: 100, period: '1s' };

/** A valid body of each schema, which each field's empty value is put into. */
const BASE: Record<RequestSchemaName, Record<string, unknown>> = {
  CreateTask: { url: OK_URL, enabled: false },
  UpdateTask: {},
  TriggerTask: {},
  CreateBatch: { lane: 'empty-values', delay: '1d', tasks: [{ url: OK_URL }] },
  CreateSchedule: { url: OK_URL, cron: NEVER, enabled: false },
  UpdateSchedule: {},
  CreateMonitor: { name: 'empty values', schedule_type: 'interval', interval_seconds: 3600 },
  UpdateMonitor: {},
  Sync: {
    schedules: [{ key: 'empty-values', url: OK_URL, cron: NEVER }],
    monitors: [{ key: 'empty-values', name: 'empty values', schedule_type: 'interval', interval_seconds: 3600 }],
  },
  ScriptTest: {
    script: 'function filter(req) return true end',
    hook: 'filter',
    request: { method: 'POST', path: '/in', query: 'a=1', headers: {}, body: '{}', source_ip: '127.0.0.1' },
    response: { status: 200, headers: {}, body: 'ok', duration_ms: 1 },
    task: { id: 'tsk_1', name: 'a task', url: OK_URL, method: 'POST', attempt: 1 },
  },
  CreateEndpoint: { name: 'empty values', forward_urls: [OK_URL] },
  UpdateEndpoint: {},
  UpdateOrganization: {},
  CreateChannel: { kind: 'webhook', name: 'empty values', config: { url: OK_URL } },
  UpdateChannel: {},
  TestChannel: {},
  // Only counted: the walk retries nothing.
  BulkRetry: { filter: {}, dry_run: true },
  BulkReplay: { filter: {}, dry_run: true },
  EnableForward: { url: OK_URL },
};

/** What a field inside an object needs around it, by the object's path (`undefined` leaves a base field out). */
const HMAC = { type: 'hmac', secret: 's3cret', header: 'X-Signature', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' };
const ENDPOINT_KEY = { use_lane: false, flow_control: { parallelism: 2, rate: 10, period: '1s' } };
const AROUND: Record<string, Record<string, unknown>> = {
  'CreateTask flow_control': { flow_control: TASK_KEY },
  'UpdateTask flow_control': { flow_control: TASK_KEY },
  'CreateBatch flow_control': { lane: undefined, flow_control: TASK_KEY },
  'CreateBatch tasks[].flow_control': { tasks: [{ url: OK_URL, flow_control: TASK_KEY }] },
  'CreateEndpoint verification': { verification: HMAC },
  'UpdateEndpoint verification': { verification: HMAC },
  'CreateEndpoint flow_control': ENDPOINT_KEY,
  'UpdateEndpoint flow_control': ENDPOINT_KEY,
};

/** `body` with `value` at `path` (an array's first item for `[]`). */
function placed(field: Field, value: unknown): Record<string, unknown> {
  const parts = field.path.split('.');
  const around = AROUND[`${field.schema} ${parts.slice(0, -1).join('.')}`];
  const body: Record<string, unknown> = structuredClone({ ...BASE[field.schema], ...around });
  let at: any = body;
  parts.forEach((part, i) => {
    const name = part.replace(/\[\]$/, '');
    if (i === parts.length - 1) at[name] = value;
    else at = part.endsWith('[]') ? at[name][0] : at[name];
  });
  return body;
}

/** The value at `path` in a resource (no array steps), for `stored`. */
const valueAt = (data: any, path: string) => path.split('.').reduce((v, k) => v?.[k], data);

/** The schemas whose answer is the resource written, where an accepted value's `stored` is looked for. */
const ANSWERS_RESOURCE = new Set<RequestSchemaName>(['CreateTask', 'UpdateTask', 'CreateSchedule', 'UpdateSchedule', 'CreateMonitor', 'UpdateMonitor', 'CreateEndpoint', 'UpdateEndpoint', 'UpdateOrganization', 'CreateChannel', 'UpdateChannel']);

describe('every field of every request schema with its empty values', () => {
  let svc: TestService;
  let api: Api;
  const created = async (path: string, body: unknown) => {
    const res = await api('POST', path, body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data.id as string;
  };

  /** The request a schema's body goes with; an update changes a resource of its own, made for it. */
  const request = async (schema: RequestSchemaName): Promise<[string, string]> => {
    switch (schema) {
      case 'CreateTask': return ['POST', '/tasks'];
      case 'UpdateTask': return ['PUT', `/tasks/${await created('/tasks', BASE.CreateTask)}`];
      case 'TriggerTask': return ['POST', `/tasks/${await created('/tasks', BASE.CreateTask)}/trigger`];
      case 'CreateBatch': return ['POST', '/tasks/batch'];
      case 'CreateSchedule': return ['POST', '/schedules'];
      case 'UpdateSchedule': return ['PUT', `/schedules/${await created('/schedules', BASE.CreateSchedule)}`];
      case 'CreateMonitor': return ['POST', '/monitors'];
      case 'UpdateMonitor': return ['PUT', `/monitors/${await created('/monitors', BASE.CreateMonitor)}`];
      case 'Sync': return ['PUT', '/sync'];
      case 'ScriptTest': return ['POST', '/scripts/test'];
      case 'CreateEndpoint': return ['POST', '/endpoints'];
      case 'UpdateEndpoint': return ['PUT', `/endpoints/${await created('/endpoints', BASE.CreateEndpoint)}`];
      case 'UpdateOrganization': return ['PUT', '/organization'];
      case 'CreateChannel': return ['POST', '/channels'];
      case 'UpdateChannel': return ['PUT', `/channels/${await created('/channels', BASE.CreateChannel)}`];
      case 'TestChannel': return ['POST', `/channels/${await created('/channels', BASE.CreateChannel)}/test`];
      case 'BulkRetry': return ['POST', '/executions/retry'];
      case 'BulkReplay': return ['POST', `/endpoints/${await created('/endpoints', BASE.CreateEndpoint)}/events/replay`];
      case 'EnableForward': return ['POST', `/endpoints/${await created('/endpoints', BASE.CreateEndpoint)}/forwards/enable`];
    }
  };

  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg('pro')).api;
  });
  after(() => svc?.stop());

  test('the walk reaches nested fields, and EXPECTED names no field the schemas lack', () => {
    const names = new Set(FIELDS.map((f) => `${f.schema} ${f.path}`));
    for (const f of ['CreateTask expected_status_codes', 'CreateBatch tasks[].url', 'CreateBatch tasks[].flow_control.parallelism', 'Sync schedules[].cron', 'CreateEndpoint verification.secret']) {
      assert.ok(names.has(f), f);
    }
    const stale = Object.entries(EXPECTED).flatMap(([schema, fields]) => Object.keys(fields).map((path) => `${schema} ${path}`)).filter((f) => !names.has(f));
    assert.deepEqual(stale, []);
  });

  const succeeded = (ids: string[]) =>
    eventually(async () => {
      const rows = await Promise.all(ids.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
      return rows.every((e) => e.status === 'success') ? rows : null;
    }, 60_000, 100);

  test('empty means the default when it runs: tasks with lane "" run at once, any 2xx succeeds, any body, no callback', async () => {
    const target = await startGateTarget();
    try {
      const empty = { lane: '', expected_status_codes: '', expected_body_pattern: '', callback_url: '', on_failure_url: '', on_recovery_url: '', debounce_key: '', script: '' };
      const created = await Promise.all(['a', 'b'].map((name) => api('POST', '/tasks', { url: `${target.url}/${name}`, ...empty })));
      for (const res of created) assert.equal(res.status, 201, JSON.stringify(res.body));
      // No lane: both are sent before either is answered (one lane would hold the second).
      await eventually(() => target.open() === 2, 60_000, 20);
      for (const r of target.received) r.release(204);
      await succeeded(created.map((res) => res.body.data.last_execution_id));
      const task = (await api('GET', `/tasks/${created[0]!.body.data.id}`)).body.data;
      assert.deepEqual(
        Object.fromEntries(Object.keys(empty).map((k) => [k, task[k]])),
        Object.fromEntries(Object.keys(empty).map((k) => [k, null])),
      );
      // A schedule's expected_status_codes, a batch's callback_url, a trigger's callback_url.
      const schedule = await api('POST', '/schedules', { url: `${target.url}/schedule`, cron: NEVER, expected_status_codes: '' });
      assert.equal(schedule.status, 201, JSON.stringify(schedule.body));
      const ticked = await api('POST', `/schedules/${schedule.body.data.id}/trigger`, { callback_url: '' });
      assert.equal(ticked.status, 202, JSON.stringify(ticked.body));
      const batch = await api('POST', '/tasks/batch', { lane: 'empty-values-batch', callback_url: '', tasks: [{ url: `${target.url}/batch` }] });
      assert.equal(batch.status, 201, JSON.stringify(batch.body));
      await eventually(() => target.received.length === 4, 60_000, 20);
      for (const r of target.received) r.release(201);
      const batchTask = (await api('GET', '/tasks')).body.data.find((t: { lane: string | null }) => t.lane === 'empty-values-batch');
      assert.equal(batchTask.callback_url, null);
      await succeeded([ticked.body.data.execution_id, batchTask.last_execution_id]);
    } finally {
      await target.close();
    }
  });

  for (const schema of Object.keys(REQUEST_SCHEMAS) as RequestSchemaName[]) {
    test(`${schema}: each empty value accepted with its default or refused naming its field`, async () => {
      const problems: string[] = [];
      for (const field of FIELDS.filter((f) => f.schema === schema)) {
        for (const empty of field.empties) {
          const name = `${schema} ${field.path} ${empty}`;
          const [method, path] = await request(schema);
          const res = await api(method, path, placed(field, EMPTY[empty]));
          const seen = res.status === 422 ? `422 ${res.body.error.field}` : `${res.status}`;
          const expected = EXPECTED[schema][field.path]?.[empty];
          if (!expected) {
            problems.push(`${name}: not classified in EXPECTED (answered ${seen}: ${JSON.stringify(res.body).slice(0, 160)})`);
            continue;
          }
          if (!expected.accepted) {
            const want = field.path.replace(/\[\]/g, '[0]');
            if (res.status !== 422 || res.body.error.field !== want) problems.push(`${name}: want 422 naming ${want}, got ${seen} ${JSON.stringify(res.body).slice(0, 200)}`);
            continue;
          }
          if (res.status < 200 || res.status > 299) {
            problems.push(`${name}: want it accepted, got ${seen} ${JSON.stringify(res.body).slice(0, 200)}`);
            continue;
          }
          if (expected.stored !== undefined && ANSWERS_RESOURCE.has(schema)) {
            const stored = valueAt(res.body.data, field.path);
            if (JSON.stringify(stored) !== JSON.stringify(expected.stored)) problems.push(`${name}: want ${field.path} ${JSON.stringify(expected.stored)} in the answer, got ${JSON.stringify(stored)}`);
          }
        }
      }
      assert.deepEqual(problems, []);
    });
  }
});
