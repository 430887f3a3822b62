// Every payload rule through every path that creates or changes a resource (POST,
// PUT, a batch, a debounced create, sync), against the real service: the same 422
// naming the same field (with the item's place in a batch or a sync), and nothing stored.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { batchWith, OK_URL, placed, RULES, VALID, type PathName } from './support/payload-rules.ts';
import { startTestService, type Api, type TestService } from './support/service.ts';

type Fields = Record<string, unknown>;

describe('payload rules on every path', () => {
  let svc: TestService;
  let api: Api;
  const ids = { task: '', schedule: '', monitor: '', endpoint: '' };
  const created = async (path: string, body: unknown) => {
    const res = await api('POST', path, body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data.id as string;
  };
  const counts = async () => {
    const [tasks, schedules, monitors, endpoints] = await Promise.all(['/tasks', '/schedules', '/monitors', '/endpoints'].map(async (p) => (await api('GET', p)).body.data.length as number));
    return { tasks, schedules, monitors, endpoints };
  };

  /** The request each path makes, with the rule's fields in their place. */
  const requests: Record<PathName, (f: Fields) => [string, string, unknown]> = {
    'POST /tasks': (f) => ['POST', '/tasks', { ...VALID.task, ...f }],
    'POST /tasks (debounced)': (f) => ['POST', '/tasks', { ...VALID.debounced, ...f }],
    'PUT /tasks/:id': (f) => ['PUT', `/tasks/${ids.task}`, f],
    'POST /tasks/batch (a task)': (f) => ['POST', '/tasks/batch', { ...VALID.batch, tasks: [{ url: OK_URL, ...f }] }],
    'POST /tasks/batch (shared)': (f) => ['POST', '/tasks/batch', batchWith(f)],
    'POST /schedules': (f) => ['POST', '/schedules', { ...VALID.schedule, ...f }],
    'PUT /schedules/:id': (f) => ['PUT', `/schedules/${ids.schedule}`, f],
    'PUT /sync (a schedule)': (f) => ['PUT', '/sync', { schedules: [{ ...VALID.syncedSchedule, ...f }] }],
    'POST /monitors': (f) => ['POST', '/monitors', { ...VALID.monitor, ...f }],
    'PUT /monitors/:id': (f) => ['PUT', `/monitors/${ids.monitor}`, f],
    'PUT /sync (a monitor)': (f) => ['PUT', '/sync', { monitors: [{ ...VALID.syncedMonitor, ...f }] }],
    'POST /endpoints': (f) => ['POST', '/endpoints', { ...VALID.endpoint, ...f }],
    'PUT /endpoints/:id': (f) => ['PUT', `/endpoints/${ids.endpoint}`, f],
  };
  const send = (path: PathName, fields: Fields) => {
    const [method, url, body] = requests[path](fields);
    return api(method, url, body);
  };

  let before0: Awaited<ReturnType<typeof counts>>;
  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg('pro')).api;
    ids.task = await created('/tasks', VALID.task);
    ids.schedule = await created('/schedules', VALID.schedule);
    ids.monitor = await created('/monitors', VALID.monitor);
    ids.endpoint = await created('/endpoints', VALID.endpoint);
    before0 = await counts();
  });
  after(() => svc?.stop());

  /** The message without the item's place, which some layers put in it and some do not. */
  const bare = (message: string) => message.replace(/^(tasks|schedules|monitors)\[0\]\./, '').replace(/grace_seconds/g, 'grace_period_seconds');

  for (const rule of RULES) {
    test(`${rule.name}: 422 naming the field on ${rule.on.join(', ')}`, async () => {
      const messages = new Set<string>();
      for (const path of rule.on) {
        const { fields, field } = placed(path, rule);
        const res = await send(path, fields);
        assert.equal(res.status, 422, `${path}: ${JSON.stringify(res.body).slice(0, 300)}`);
        assert.equal(res.body.error.field, field, `${path}: ${res.body.error.message}`);
        messages.add(bare(res.body.error.message));
      }
      assert.equal(messages.size, 1, `one message on every path: ${[...messages].join(' | ')}`);
    });
  }

  test('the issue\'s synced schedule (Transfer-Encoding, a CR LF value) is refused as POST /schedules refuses it', async () => {
    const headers = { 'Transfer-Encoding': 'chunked', 'X-Bad': 'a\r\nb' };
    const synced = await api('PUT', '/sync', { schedules: [{ key: 'issue-20', url: OK_URL, cron: '@daily', headers }] });
    assert.equal(synced.status, 422, JSON.stringify(synced.body));
    assert.equal(synced.body.error.field, 'schedules[0].headers.Transfer-Encoding');
    const posted = await api('POST', '/schedules', { url: OK_URL, cron: '@daily', headers });
    assert.equal(posted.status, 422);
    assert.equal(posted.body.error.message, synced.body.error.message);
    const value = await api('PUT', '/sync', { schedules: [{ key: 'issue-20', url: OK_URL, cron: '@daily', headers: { 'X-Bad': 'a\r\nb' } }] });
    assert.equal(value.status, 422);
    assert.equal(value.body.error.field, 'schedules[0].headers.X-Bad');
  });

  test('no refused call stored anything', async () => {
    assert.deepEqual(await counts(), before0);
  });

  test('the limits are inclusive on every path: 100 headers, an 8192-character value, exactly 256 KB, timeout and retries at their ends', async () => {
    const edge = { headers: { ...Object.fromEntries(Array.from({ length: 99 }, (_, i) => [`X-H${i}`, 'v'])), 'X-Long': 'v'.repeat(8192) }, body: 'a'.repeat(262_144) };
    const ends = { timeout_ms: 300_000, retry_attempts: 10 };
    const cases: Array<[PathName, Fields]> = [
      ['POST /tasks', { ...edge, ...ends }],
      ['POST /tasks (debounced)', { ...edge, timeout_ms: 1000, retry_attempts: 0 }],
      ['PUT /tasks/:id', { ...edge, ...ends }],
      ['POST /tasks/batch (a task)', edge],
      ['POST /tasks/batch (shared)', { headers: edge.headers, ...ends }],
      ['POST /schedules', { ...edge, ...ends }],
      ['PUT /schedules/:id', { ...edge, timeout_ms: 1000, retry_attempts: 0 }],
      ['PUT /sync (a schedule)', edge],
      ['POST /monitors', { interval_seconds: 60, grace_period_seconds: 3600 }],
      ['PUT /monitors/:id', { interval_seconds: 604_800, grace_period_seconds: 0 }],
      ['PUT /sync (a monitor)', { interval_seconds: 60, grace_seconds: 3600 }],
      ['POST /endpoints', { forward_headers: edge.headers, forward_body: edge.body, retry_attempts: 10 }],
      ['PUT /endpoints/:id', { forward_headers: edge.headers, forward_body: edge.body, retry_attempts: 0 }],
    ];
    for (const [path, fields] of cases) {
      const res = await send(path, fields);
      assert.ok(res.status >= 200 && res.status < 300, `${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
  });
});
