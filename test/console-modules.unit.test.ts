// The console's modules that need no browser: SSE framing, hash routes, the next runs
// of a cron expression (against the service's own cron evaluation), per-minute counts
// and the hex dump. They are plain ES modules served to the browser as they are.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nextTick } from '../src/commands/schedule/cron.ts';

// Loaded by URL: they are JavaScript without type declarations, served as they are.
const load = (file: string): Promise<any> => import(new URL(`../console/js/${file}`, import.meta.url).href);
const { createSseParser } = await load('sse.js');
const { parseHash, matchRoute, hashWith } = await load('router.js');
const { nextRuns, parseCron } = await load('cron.js');
const { perMinute, OUTCOMES } = await load('per-minute.js');
const { hexDump, prettyJson } = await load('body-view.js');

describe('SSE parser', () => {
  test('events split across chunks anywhere, CRLF or LF, comments skipped, multi-line data joined', () => {
    const text = ': keep-alive\n\nevent: task\ndata: {"id":"tsk_1"}\n\r\nevent: execution\r\ndata: a\r\ndata: b\r\n\r\ndata: plain\n\n: keep-alive\n\n';
    const whole: unknown[] = [];
    createSseParser((e: unknown) => whole.push(e)).push(text);
    assert.deepEqual(whole, [
      { event: 'task', data: '{"id":"tsk_1"}', id: '' },
      { event: 'execution', data: 'a\nb', id: '' },
      { event: 'message', data: 'plain', id: '' },
    ]);
    // Every way of cutting the stream in two gives the same events.
    for (let cut = 1; cut < text.length; cut++) {
      const got: unknown[] = [];
      const parser = createSseParser((e: unknown) => got.push(e));
      parser.push(text.slice(0, cut));
      parser.push(text.slice(cut));
      assert.deepEqual(got, whole, `cut at ${cut}`);
    }
  });

  test('an event is not delivered before its blank line', () => {
    const got: unknown[] = [];
    const parser = createSseParser((e: unknown) => got.push(e));
    parser.push('event: task\ndata: x\n');
    assert.equal(got.length, 0);
    parser.push('\n');
    assert.equal(got.length, 1);
  });
});

describe('hash routes', () => {
  const routes = [
    { pattern: [], name: 'overview' },
    { pattern: ['tasks', 'new'], name: 'new' },
    { pattern: ['tasks', ':id'], name: 'task' },
    { pattern: ['endpoints', ':id', 'events', ':eventId'], name: 'event' },
  ];
  test('paths, params and queries', () => {
    assert.equal(matchRoute(routes, parseHash('').path).route.name, 'overview');
    assert.equal(matchRoute(routes, parseHash('#/').path).route.name, 'overview');
    assert.equal(matchRoute(routes, parseHash('#/tasks/new').path).route.name, 'new');
    assert.deepEqual(matchRoute(routes, parseHash('#/tasks/tsk_1').path).params, { id: 'tsk_1' });
    assert.deepEqual(matchRoute(routes, parseHash('#/endpoints/ep_1/events/evt_2').path).params, { id: 'ep_1', eventId: 'evt_2' });
    assert.equal(matchRoute(routes, parseHash('#/tasks/tsk_1/nope').path), null);
    const { path, query } = parseHash('#/executions?status=failed&since=24h');
    assert.deepEqual(path, ['executions']);
    assert.equal(query.get('status'), 'failed');
    assert.equal(query.get('since'), '24h');
  });
  test('hashWith leaves out empty values and round-trips what it encodes', () => {
    const hash = hashWith(['executions'], { status: 'failed', task_id: '', since: '2026-01-01T00:00:00+01:00' });
    assert.equal(hash, '#/executions?status=failed&since=2026-01-01T00%3A00%3A00%2B01%3A00');
    assert.equal(parseHash(hash).query.get('since'), '2026-01-01T00:00:00+01:00');
    assert.deepEqual(parseHash('#/tasks/a%2Fb').path, ['tasks', 'a/b']);
  });
});

describe('next runs of a cron expression', () => {
  const start = Date.parse('2026-03-01T10:07:13Z');
  const cases: Array<[string, string]> = [
    ['*/5 * * * *', 'UTC'],
    ['0 9 * * MON-FRI', 'Europe/Berlin'],
    ['0 0 13 * 5', 'UTC'],
    ['@monthly', 'Asia/Kolkata'],
    ['@daily', 'America/Los_Angeles'],
    ['@hourly', 'Asia/Kathmandu'],
    ['*/15 0-10/2 * JAN,JUN *', 'Australia/Adelaide'],
    ['10,40 * * * * *', 'UTC'],
    ['0 12 * * 7', 'UTC'],
    ['15 3 1-7 * sun', 'Europe/London'],
  ];
  for (const [expr, tz] of cases) {
    test(`${expr} in ${tz} matches the service's evaluation`, () => {
      const mine = nextRuns(expr, tz, start, 8).map((d: Date) => d.toISOString());
      const theirs: string[] = [];
      for (let t = start; theirs.length < 8;) {
        const next = nextTick(expr, tz, t);
        theirs.push(next.toISOString());
        t = next.getTime();
      }
      assert.deepEqual(mine, theirs);
    });
  }
  test('what it does not read gives null rather than a wrong answer', () => {
    for (const expr of ['0 0 L * *', '0 0 * * 5#3', 'nope', '* * * *', '61 * * * *', '@reboot']) assert.equal(parseCron(expr), null, expr);
    assert.equal(nextRuns('* * * * *', 'Not/AZone', start, 1), null);
  });
});

describe('per-minute counts', () => {
  test('rows land in their minute and outcome; pending and running are in progress; outside rows are left out', () => {
    const from = Date.parse('2026-03-01T10:00:00Z');
    const to = Date.parse('2026-03-01T10:02:30Z');
    const row = (status: string, at: string) => ({ status, scheduled_for: at });
    const data = perMinute([
      row('success', '2026-03-01T10:00:05Z'),
      row('success', '2026-03-01T10:00:59Z'),
      row('failed', '2026-03-01T10:01:00Z'),
      row('running', '2026-03-01T10:02:10Z'),
      row('pending', '2026-03-01T10:02:20Z'),
      row('success', '2026-03-01T09:59:59Z'),
      row('success', '2026-03-01T10:03:00Z'),
    ], from, to);
    assert.deepEqual(data[0], [from / 1000, from / 1000 + 60, from / 1000 + 120]);
    const series = (name: string) => data[OUTCOMES.indexOf(name) + 1];
    assert.deepEqual(series('success'), [2, 0, 0]);
    assert.deepEqual(series('failed'), [0, 1, 0]);
    assert.deepEqual(series('in progress'), [0, 0, 2]);
    assert.deepEqual(series('timeout'), [0, 0, 0]);
  });
});

describe('body views', () => {
  test('hex dump: offset, 16 bytes a line, printable ASCII beside', () => {
    const bytes = new Uint8Array([...Buffer.from('{"a":1}'), 0x00, 0xff, ...Buffer.from('0123456789')]);
    assert.equal(hexDump(bytes), [
      '00000000  7b 22 61 22 3a 31 7d 00 ff 30 31 32 33 34 35 36  {"a":1}..0123456',
      '00000010  37 38 39                                         789',
    ].join('\n'));
    assert.match(hexDump(new Uint8Array(40), 16), /… 24 more bytes$/);
  });
  test('pretty JSON only for JSON', () => {
    assert.equal(prettyJson('{"a":[1,2]}'), '{\n  "a": [\n    1,\n    2\n  ]\n}');
    assert.equal(prettyJson('<xml/>'), null);
  });

  test('runs.js: runs from pings (each end with a duration closes its start; overlapping runs on rows of their own; an open start is running)', async () => {
    const { runsOf, durationSeries, kindText } = await load('runs.js');
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    const pings = [
      { received_at: at(0), kind: 'start', rid: 'a', duration_ms: null },
      { received_at: at(10), kind: 'start', rid: 'b', duration_ms: null },
      { received_at: at(20), kind: 'exit', exit_status: 0, rid: 'b', duration_ms: 10_000 },
      { received_at: at(30), kind: 'exit', exit_status: 2, rid: 'a', duration_ms: 30_000 },
      { received_at: at(40), kind: 'log', rid: null, duration_ms: null },
      { received_at: at(50), kind: 'start', rid: null, duration_ms: null },
    ].reverse();
    const runs = runsOf(pings);
    assert.deepEqual(runs.map((r: any) => [r.durationMs, r.outcome, r.lane]), [[30_000, 'exit 2', 0], [10_000, 'success', 1], [null, 'running', 0]]);
    assert.deepEqual(durationSeries(runs), [[Date.parse(at(20)) / 1000, Date.parse(at(30)) / 1000], [10, null], [null, 30]]);
    assert.equal(kindText({ kind: 'exit', exit_status: 2 }), 'exit 2');
  });
});
