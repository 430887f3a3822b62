// The payload rules, one row each, and every path a resource is created or changed
// by. test/deciders/payload-rules.unit.test.ts runs each row through the deciders
// behind each path; test/payload-rules.e2e.test.ts through the HTTP API.

/** The paths that create or change a task, schedule or monitor. */
export type PathName =
  | 'POST /tasks'
  | 'POST /tasks (debounced)'
  | 'PUT /tasks/:id'
  | 'POST /tasks/batch (a task)'
  | 'POST /tasks/batch (shared)'
  | 'POST /schedules'
  | 'PUT /schedules/:id'
  | 'PUT /sync (a schedule)'
  | 'POST /monitors'
  | 'PUT /monitors/:id'
  | 'PUT /sync (a monitor)'
  | 'POST /endpoints'
  | 'PUT /endpoints/:id';

export const OK_URL = 'http://127.0.0.1:9/never';
const SCHEDULE_PATHS: PathName[] = ['POST /schedules', 'PUT /schedules/:id', 'PUT /sync (a schedule)'];
const TASK_PATHS: PathName[] = ['POST /tasks', 'POST /tasks (debounced)', 'PUT /tasks/:id'];
/** What every stored request has: a task's, a batch task's, a schedule's. */
const REQUEST_PATHS: PathName[] = [...TASK_PATHS, 'POST /tasks/batch (a task)', ...SCHEDULE_PATHS];
const MONITOR_PATHS: PathName[] = ['POST /monitors', 'PUT /monitors/:id', 'PUT /sync (a monitor)'];
const ENDPOINT_PATHS: PathName[] = ['POST /endpoints', 'PUT /endpoints/:id'];

export interface Rule {
  name: string;
  /** The fields that break the rule, as a task, schedule or monitor takes them. */
  fields: Record<string, unknown>;
  /** The field the 422 names (before the item's place, e.g. `tasks[0].`). */
  field: string;
  on: PathName[];
}

const headers = (h: Record<string, string>) => ({ headers: h });
const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`X-H${i}`, 'v']));
const FAR = '9000-01-01T00:00:00Z';

export const RULES: Rule[] = [
  // The request: where, how, with what.
  { name: 'url not http', fields: { url: 'ftp://example.com/x' }, field: 'url', on: REQUEST_PATHS },
  { name: 'url with port 0', fields: { url: 'http://example.com:0/x' }, field: 'url', on: REQUEST_PATHS },
  { name: 'url with a port past 65535', fields: { url: 'http://example.com:70000/x' }, field: 'url', on: REQUEST_PATHS },
  { name: 'url of 2049 characters', fields: { url: `http://example.com/${'p'.repeat(2030)}` }, field: 'url', on: [...TASK_PATHS, ...SCHEDULE_PATHS] },
  { name: 'batch url of 256 characters', fields: { url: `http://example.com/${'p'.repeat(237)}` }, field: 'url', on: ['POST /tasks/batch (a task)'] },
  { name: 'unknown method', fields: { method: 'FETCH' }, field: 'method', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'Transfer-Encoding header', fields: headers({ 'Transfer-Encoding': 'chunked' }), field: 'headers.Transfer-Encoding', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'Connection header', fields: headers({ Connection: 'close' }), field: 'headers.Connection', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'content-length header', fields: headers({ 'content-length': '5' }), field: 'headers.content-length', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'Expect header', fields: headers({ Expect: '100-continue' }), field: 'headers.Expect', on: REQUEST_PATHS },
  { name: 'Keep-Alive header', fields: headers({ 'Keep-Alive': 'timeout=5' }), field: 'headers.Keep-Alive', on: REQUEST_PATHS },
  { name: 'Upgrade header', fields: headers({ Upgrade: 'websocket' }), field: 'headers.Upgrade', on: REQUEST_PATHS },
  { name: 'X-Jetcron-* header', fields: headers({ 'X-Jetcron-Signature': 'sha256=0' }), field: 'headers.X-Jetcron-Signature', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'CR LF in a header value', fields: headers({ 'X-Bad': 'a\r\nb' }), field: 'headers.X-Bad', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'a lone LF in a header value', fields: headers({ 'X-Bad': 'a\nX-Injected: 1' }), field: 'headers.X-Bad', on: REQUEST_PATHS },
  { name: 'a control character in a header value', fields: headers({ 'X-Bad': 'a\u0007b' }), field: 'headers.X-Bad', on: REQUEST_PATHS },
  { name: 'CR LF in a header name', fields: headers({ 'X-Bad\r\nX-Injected': '1' }), field: 'headers', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'a space in a header name', fields: headers({ 'X A': '1' }), field: 'headers', on: REQUEST_PATHS },
  { name: '101 headers', fields: headers(many(101)), field: 'headers', on: [...REQUEST_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'a header value of 8193 characters', fields: headers({ 'X-Long': 'v'.repeat(8193) }), field: 'headers.X-Long', on: REQUEST_PATHS },
  { name: 'body over 256 KB', fields: { body: 'a'.repeat(262_145) }, field: 'body', on: REQUEST_PATHS },
  { name: 'JSON body over 256 KB', fields: { body: { k: 'a'.repeat(262_140) } }, field: 'body', on: REQUEST_PATHS },
  { name: 'body over 256 KB in UTF-8 bytes', fields: { body: `${'a'.repeat(262_143)}é` }, field: 'body', on: REQUEST_PATHS },
  { name: 'name of 256 characters', fields: { name: 'n'.repeat(256) }, field: 'name', on: [...REQUEST_PATHS, ...ENDPOINT_PATHS, 'POST /monitors', 'PUT /monitors/:id'] },
  // How long, how often.
  { name: 'timeout_ms 999', fields: { timeout_ms: 999 }, field: 'timeout_ms', on: [...TASK_PATHS, 'POST /tasks/batch (shared)', 'POST /schedules', 'PUT /schedules/:id'] },
  { name: 'timeout_ms 300001', fields: { timeout_ms: 300_001 }, field: 'timeout_ms', on: [...TASK_PATHS, 'POST /tasks/batch (shared)', 'POST /schedules', 'PUT /schedules/:id'] },
  { name: 'retry_attempts 11', fields: { retry_attempts: 11 }, field: 'retry_attempts', on: [...TASK_PATHS, 'POST /tasks/batch (shared)', 'POST /schedules', 'PUT /schedules/:id', ...ENDPOINT_PATHS] },
  { name: 'retry_attempts -1', fields: { retry_attempts: -1 }, field: 'retry_attempts', on: [...TASK_PATHS, 'POST /tasks/batch (shared)', 'POST /schedules', 'PUT /schedules/:id', ...ENDPOINT_PATHS] },
  // Where the outcome goes.
  { name: 'callback_url not http', fields: { callback_url: 'mailto:a@example.com' }, field: 'callback_url', on: [...TASK_PATHS, 'POST /tasks/batch (shared)'] },
  { name: 'on_failure_url with port 0', fields: { on_failure_url: 'http://example.com:0/' }, field: 'on_failure_url', on: [...TASK_PATHS, 'POST /monitors', 'PUT /monitors/:id', ...ENDPOINT_PATHS] },
  { name: 'on_recovery_url not http', fields: { on_recovery_url: 'ftp://example.com/' }, field: 'on_recovery_url', on: [...TASK_PATHS, 'POST /monitors', 'PUT /monitors/:id', ...ENDPOINT_PATHS] },
  { name: 'expected_status_codes not codes', fields: { expected_status_codes: '200,abc' }, field: 'expected_status_codes', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /schedules', 'PUT /schedules/:id'] },
  // When.
  { name: 'delay and run_at', fields: { delay: '5m', run_at: '2030-01-01T00:00:00Z' }, field: 'run_at', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (shared)'] },
  { name: 'delay not a duration', fields: { delay: '5x' }, field: 'delay', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (shared)'] },
  { name: 'delay past 10 years', fields: { delay: '3651d' }, field: 'delay', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (shared)'] },
  { name: 'run_at past 10 years ahead', fields: { run_at: FAR }, field: 'run_at', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (shared)'] },
  { name: 'cron not cron', fields: { cron: 'not cron' }, field: 'cron', on: SCHEDULE_PATHS },
  { name: 'cron minute 61', fields: { cron: '61 * * * *' }, field: 'cron', on: SCHEDULE_PATHS },
  { name: 'unknown cron alias', fields: { cron: '@fortnightly' }, field: 'cron', on: SCHEDULE_PATHS },
  { name: 'unknown time zone', fields: { timezone: 'Mars/Olympus' }, field: 'timezone', on: SCHEDULE_PATHS },
  // Lanes and debounce.
  { name: 'lane of 256 characters', fields: { lane: 'l'.repeat(256) }, field: 'lane', on: ['POST /tasks', 'PUT /tasks/:id', 'POST /tasks/batch (shared)'] },
  { name: 'debounce without debounce_key', fields: { debounce: '5s', lane: 'l' }, field: 'debounce_key', on: ['POST /tasks', 'PUT /tasks/:id'] },
  { name: 'debounce without lane', fields: { debounce: '5s', debounce_key: 'k' }, field: 'lane', on: ['POST /tasks', 'PUT /tasks/:id'] },
  { name: 'debounce_key without debounce', fields: { debounce_key: 'k', lane: 'l' }, field: 'debounce', on: ['POST /tasks', 'PUT /tasks/:id'] },
  { name: 'debounce with a delay', fields: { delay: '5s' }, field: 'delay', on: ['POST /tasks (debounced)'] },
  { name: 'debounce past 10 years', fields: { debounce: '3651d' }, field: 'debounce', on: ['POST /tasks (debounced)'] },
  // Endpoints: what they forward is a request too.
  { name: 'forward_urls not http', fields: { forward_urls: ['ftp://example.com/'] }, field: 'forward_urls[0]', on: ENDPOINT_PATHS },
  { name: 'forward_urls repeated', fields: { forward_urls: [OK_URL, OK_URL] }, field: 'forward_urls[1]', on: ENDPOINT_PATHS },
  { name: 'Transfer-Encoding forward header', fields: { forward_headers: { 'Transfer-Encoding': 'chunked' } }, field: 'forward_headers.Transfer-Encoding', on: ENDPOINT_PATHS },
  { name: 'CR LF in a forward header value', fields: { forward_headers: { 'X-Bad': 'a\r\nb' } }, field: 'forward_headers.X-Bad', on: ENDPOINT_PATHS },
  { name: 'forward_body over 256 KB in UTF-8 bytes', fields: { forward_body: `${'a'.repeat(262_143)}é` }, field: 'forward_body', on: ENDPOINT_PATHS },
  // Monitors.
  { name: 'interval_seconds 59', fields: { interval_seconds: 59 }, field: 'interval_seconds', on: MONITOR_PATHS },
  { name: 'interval_seconds past a week', fields: { interval_seconds: 604_801 }, field: 'interval_seconds', on: MONITOR_PATHS },
  { name: 'grace over an hour', fields: { grace_period_seconds: 3601 }, field: 'grace_period_seconds', on: MONITOR_PATHS },
  { name: 'monitor cron not cron', fields: { schedule_type: 'cron', cron_expression: 'not cron' }, field: 'cron_expression', on: MONITOR_PATHS },
  { name: 'monitor time zone unknown', fields: { schedule_type: 'cron', cron_expression: '@daily', timezone: 'Mars/Olympus' }, field: 'timezone', on: MONITOR_PATHS },
];

/** Where a path puts the rule's fields, and what it calls them (sync's monitors say `grace_seconds`). */
export function placed(path: PathName, rule: Rule): { fields: Record<string, unknown>; field: string } {
  if (path === 'PUT /sync (a monitor)') {
    const { grace_period_seconds: grace, ...rest } = rule.fields;
    const fields = grace === undefined ? rest : { ...rest, grace_seconds: grace };
    const field = rule.field === 'grace_period_seconds' ? 'grace_seconds' : rule.field;
    return { fields, field: `monitors[0].${field}` };
  }
  const prefix = path === 'POST /tasks/batch (a task)' ? 'tasks[0].' : path === 'PUT /sync (a schedule)' ? 'schedules[0].' : '';
  return { fields: rule.fields, field: `${prefix}${rule.field}` };
}

/** A valid resource of each kind, to break one rule of. */
export const VALID: Record<'task' | 'debounced' | 'batch' | 'schedule' | 'syncedSchedule' | 'monitor' | 'syncedMonitor' | 'endpoint', Record<string, unknown>> = {
  task: { url: OK_URL, enabled: false },
  debounced: { url: OK_URL, debounce: '1h', debounce_key: 'k', lane: 'debounced' },
  batch: { lane: 'rules', delay: '1d', tasks: [{ url: OK_URL }] },
  schedule: { url: OK_URL, cron: '0 0 1 1 *', enabled: false },
  syncedSchedule: { key: 'ruled', url: OK_URL, cron: '0 0 1 1 *' },
  monitor: { name: 'ruled', schedule_type: 'interval', interval_seconds: 3600 },
  syncedMonitor: { key: 'ruled', name: 'ruled', schedule_type: 'interval', interval_seconds: 3600 },
  endpoint: { name: 'ruled', forward_urls: [OK_URL] },
};

/** The valid batch with the rule's shared fields; a run_at replaces its delay. */
export const batchWith = (fields: Record<string, unknown>) => ({ ...VALID.batch, ...('run_at' in fields ? { delay: undefined } : {}), ...fields });
