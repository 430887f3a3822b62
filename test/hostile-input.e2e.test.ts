// Issue 9: a seeded stream of hostile requests to every route of src/http must never
// get a 5xx, and afterwards the service must still run a task end to end (nothing it
// accepted wedged the projector). Reproduce a run with JETCRON_FUZZ_SEED=<seed>;
// JETCRON_FUZZ_REQUESTS changes how many requests go out; JETCRON_FUZZ_DEBUG=1 lists
// the requests that got no answer at all.
import assert from 'node:assert/strict';
import { deflateSync, gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { rawExchange, rawRequest } from './support/raw-http.ts';

const SEED = Number(process.env.JETCRON_FUZZ_SEED ?? 20_250_909);
const REQUESTS = Number(process.env.JETCRON_FUZZ_REQUESTS ?? 2000);
const PARALLEL = 8;

/** mulberry32: small, seedable, good enough to pick test inputs. */
class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

// ---- hostile values ----------------------------------------------------------------

const STRINGS = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', 'x\ud83dy', '\ud83d\ude00', '\u202e\u0000evil', 'é', '𝕏𝔂', 'Z\u0335\u0321\u0322\u031b',
  '\r\nX-Injected: 1', 'a\nb', '\t', '\u2028\u2029', '\ufeff', '\uffff', '\u007f', 'null', '__proto__', '<script>alert(1)</script>',
  "'; DROP TABLE tasks;--", '${jndi:ldap://x}', '%00', '%zz', '../../etc/passwd', 'x'.repeat(300), 'x'.repeat(70_000), '🙂'.repeat(2000),
];
/** Valid but unusual text: it must be accepted, stored and read back like any other. */
const BENIGN = ['héllo wörld', '\ud83d\ude00\ud83d\udc4d\ud83c\udffd', '\u202eevil\u202c', '中文名字', 'Z\u0335\u0321\u0322\u031b', '\u2028\u2029', '\ufeffbom', '\uffff', 'tab\there', '\\u0000 as text', '%00'];
const URLS = [
  'http://127.0.0.1:99999/', 'http://127.0.0.1:0/', 'http://[::1/', 'http://a b/', 'https://exa mple.com', 'javascript:alert(1)',
  'file:///etc/passwd', 'http://', 'http:///x', 'http://x.test:65536', 'http://%00/', 'http://\u0000/', 'http://ü.test/',
  'http://169.254.169.254/latest', 'http://user:pass@127.0.0.1:1/', `http://${'a'.repeat(3000)}.test/`, 'HTTP://X.TEST:1/', 'gopher://x',
  'http://127.0.0.1:1/\u0000', 'http://[::ffff:127.0.0.1]:1/',
];
const DURATIONS = ['99999999999999999999h', '1e9d', '0s', '-1s', '1.5m', '3651d', '3650d', 's', '10', '10y', `${'9'.repeat(400)}s`, '0.0000001s', ' 5m', '5m\u0000'];
const DATES = [
  '9999-12-31T23:59:59Z', '0000-01-01T00:00:00Z', '+275760-09-13T00:00:00Z', '2016-12-31T23:59:60Z', '2024-02-30T00:00:00Z', 'yesterday', '',
  '2024-01-01', '1970-01-01T00:00:00Z', '2038-01-19T03:14:08Z', '2030-01-01T00:00:00+14:00', '2030-01-01T00:00:00.123456789Z',
];
const CRONS = ['@midnight', '@reboot', '@every 5m', '* * * * * * *', '0 0 30 2 *', '*/0 * * * *', '60 * * * *', '@', '', 'L W # ?', '0 0 * * 8', '1-1000000 * * * *', '* '.repeat(1000), '0 0 29 2 1'];
const ZONES = ['Mars/Olympus', '', 'UTC\u0000', '../../etc/localtime', 'Etc/GMT+14', 'America/New_York', 'x'.repeat(64)];
const NUMBERS = [0, -1, -0, 1e308, -1e308, 2 ** 53 + 1, 1.5, 1e-300, 99999999999999999999, 2147483648];
/** Number tokens JSON.stringify cannot write, spliced into the text. */
const NUMBER_TOKENS = ['1e400', '-1e400', `1${'0'.repeat(400)}`, '0x10', 'NaN', 'Infinity', '-', '01', '1.', '.5'];

function deep(levels: number, leaf: unknown = 1): unknown {
  let v = leaf;
  for (let i = 0; i < levels; i++) v = i % 2 ? { a: v } : [v];
  return v;
}

function hostileValue(g: Rng, hint?: string): unknown {
  if (hint && /url/.test(hint) && g.chance(0.6)) return g.pick(URLS);
  if (hint && /delay|debounce$/.test(hint) && g.chance(0.6)) return g.pick(DURATIONS);
  if (hint && /run_at/.test(hint) && g.chance(0.6)) return g.pick(DATES);
  if (hint && /cron/.test(hint) && g.chance(0.6)) return g.pick(CRONS);
  if (hint === 'timezone' && g.chance(0.6)) return g.pick(ZONES);
  switch (g.int(9)) {
    case 0:
    case 1:
    case 2:
      return g.pick(STRINGS);
    case 3:
      return g.pick(NUMBERS);
    case 4:
      return g.pick([true, false, null]);
    case 5:
      return [g.pick(STRINGS), g.pick(NUMBERS)];
    case 6:
      return { [g.pick(STRINGS)]: g.pick(STRINGS) };
    case 7:
      return deep(g.pick([10, 63, 70, 500]));
    default:
      return g.pick([...URLS, ...DURATIONS, ...DATES, ...CRONS]);
  }
}

type Slot = { obj: Record<string | number, unknown>; key: string | number };

/** A copy of `template` with one field (at any depth) made unusual or hostile, removed, or one field added. */
function mutate(g: Rng, template: Record<string, unknown>): unknown {
  const copy = structuredClone(template);
  const slots: Slot[] = [];
  const walk = (v: unknown) => {
    if (!v || typeof v !== 'object') return;
    for (const [k, item] of Object.entries(v)) {
      slots.push({ obj: v as Slot['obj'], key: Array.isArray(v) ? Number(k) : k });
      walk(item);
    }
  };
  walk(copy);
  const roll = g.int(10);
  const texts = slots.filter((s) => typeof s.obj[s.key] === 'string' && !/url|cron|delay|run_at|timezone|method/.test(String(s.key)));
  if (roll < 2 && texts.length) {
    const { obj, key } = g.pick(texts);
    obj[key] = g.pick(BENIGN);
  } else if (roll < 6 && slots.length) {
    const { obj, key } = g.pick(slots);
    obj[key] = hostileValue(g, String(key));
  } else if (roll < 8) {
    const objects = [copy, ...slots.map((s) => s.obj[s.key]).filter((v) => v && typeof v === 'object' && !Array.isArray(v))] as Record<string, unknown>[];
    g.pick(objects)[g.pick([...STRINGS.slice(0, 12), 'retry_attemps', 'constructor', 'X-Header', 'a'.repeat(1000)])] = hostileValue(g);
  } else if (slots.length) {
    const { obj, key } = g.pick(slots);
    if (Array.isArray(obj)) obj.splice(key as number, 1);
    else delete obj[key];
  }
  return copy;
}

/** Bodies that are not a mutated template: wrong JSON, wrong bytes, wrong sizes. */
function hostileBytes(g: Rng, template: Record<string, unknown>): Buffer {
  const json = JSON.stringify(template);
  switch (g.int(16)) {
    case 0: return Buffer.from(g.pick(['', 'null', '[]', '"s"', '1', 'true', '{', '{"a":', '}', ' ', '\n\n', '{}{}', '{"a":1,}', "{'a':1}"]));
    case 1: return Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0x7b, 0x7d]);
    case 2: return Buffer.concat([Buffer.from(json.slice(0, -1)), Buffer.from(',"name":"'), Buffer.from([0xc3, 0x28, 0xa0, 0xa1]), Buffer.from('"}')]);
    case 3: return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]);
    case 4: return Buffer.from(json.replace(/"([^"]*)"/, '"$1\u0000"')); // a raw NUL byte inside a string
    case 5: return Buffer.from('['.repeat(10_000) + ']'.repeat(10_000));
    case 6: return Buffer.from(`${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`);
    case 7: return Buffer.from(json.replace(/:(\d+)/, `:${g.pick(NUMBER_TOKENS)}`).replace(/}$/, `,"n":${g.pick(NUMBER_TOKENS)}}`));
    case 8: return Buffer.from(JSON.stringify({ ...template, body: 'a'.repeat(1024 * 1024) }));
    case 9: return Buffer.from(json.replace(/"(\w+)":/, '"$1\\u0000":'));
    case 10: return Buffer.from(json.replace(/"([^"]*)"(?!:)/, '"\\ud800$1"'));
    case 11: return Buffer.from(json.replace(/"([^"]*)"(?!:)/, '"\\u0000"'));
    case 12: return Buffer.from(`${json.slice(0, -1)},"body":${JSON.stringify(deep(64))}}`);
    case 13: return Buffer.from(json.slice(0, g.int(json.length)));
    case 14: return Buffer.from(json.replace(/"([^"]*)"(?!:)/, '"\\uZZZZ"'));
    default: return Buffer.from(`${json.slice(0, -1)},"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}`);
  }
}

let bombBytes: Buffer | undefined;
/** About 9 KB of gzip that inflates to 9 MiB, past every body limit. */
const bomb = () => (bombBytes ??= gzipSync(Buffer.alloc(9 * 1024 * 1024, 0x20)));

const ENCODINGS = ['br', 'compress', 'gzip, gzip', 'identity, gzip', 'x-gzip', 'GZIP', 'deflate', 'identity', '', 'gzip;q=1', 'zstd', 'chunked', ' gzip '];
const CONTENT_TYPES = [
  'text/plain', 'application/json; charset=latin1', 'application/json; charset=ebcdic', 'application/json; charset=utf-8', 'application/json; charset=UTF-16',
  'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=', 'application/json;;;', '*/*',
  'application/json; charset="utf-8"; foo=bar', 'application/vnd.api+json', 'garbage', 'application/json; charset=\u00e9',
];
const IDS = [
  '%00', '%', '%zz', '%C0%AF', '%E0%A4%A', '%u002e', '%ff%fe', '..%00', '..', '.', '%2e%2e', `tsk_${'a'.repeat(5000)}`, 'tsk_*', 'tsk_%3E', 'evt.%3E',
  '%F0%9F%98%80', '%20', '%E2%80%AE', '*', 'null', '0', '-1', 'a.b.c', 'tsk_0000000000aaaaaaaaaaaa', 'exe_0000000000aaaaaaaaaaaa', '%ED%A0%80', 'x%0d%0aSet-Cookie:a=b',
  encodeURIComponent('é'), '%c3%a9', `pm_${'z'.repeat(32)}`, `ep_${'0'.repeat(32)}`,
];
const QUERY_NAMES = ['limit', 'offset', 'status', 'since', 'until', 'task_id', 'lane', 'x', 'limit[]', 'a[b][c][d][e][f][g]', '%00', '%zz', ''];
const QUERY_VALUES = [
  '%', '%zz', '%00', '%ff', '%C0%AF', '99999999999999999999', '-1', '1e3', '0', '101', 'pending', 'PENDING', '7d', '99999999999999d', '9999-12-31T23:59:59Z',
  '0001-01-01T00:00:00Z', '2016-12-31T23:59:60Z', '%ED%A0%80', encodeURIComponent('é\ud83d\ude00'), 'a'.repeat(5000), '+', '%2B', '&&', '==',
];
const AUTHS = (good: string, other: string) => [
  null, 'Bearer', 'Bearer pk_x', `Bearer ${other}`, 'Basic dXNlcjpwYXNz', `Bearer ${good}x`, `Bearer ${'a'.repeat(5000)}`, `Bearer ${good.split('.')[0]}`,
  `bearer   ${good}`, 'Bearer pk_\u00e9.sk_\u00e9', `Bearer ${good} extra`,
];
const METHODS_OTHER = ['PATCH', 'OPTIONS', 'HEAD', 'PROPFIND', 'TRACE', 'PUT', 'DELETE', 'POST', 'GET', 'FOO'];

// ---- routes ------------------------------------------------------------------------

type Template = 'task' | 'taskUpdate' | 'trigger' | 'batch' | 'schedule' | 'monitor' | 'endpoint' | 'sync' | 'org';
type IdKind = 'task' | 'execution' | 'schedule' | 'monitor' | 'endpoint' | 'event' | 'token' | 'slug';
interface Route {
  method: string;
  path: string;
  body?: Template;
  /** The API key is needed (everything under /api/v1 but the OpenAPI document). */
  auth: boolean;
}

/**
 * Every route of src/http (the routers and app.ts), plus paths no route has; but
 * `GET /api/v1/live`, whose answer never ends (test/live-feed.e2e.test.ts).
 */
const ROUTES: Route[] = [
  ...[
    ['GET', '/healthz'], ['GET', '/livez'], ['GET', '/metrics'], ['GET', '/api/v1/openapi.json'], ['GET', '/'], ['GET', '/nope/%zz'],
    ['GET', '/console/vendor/uPlot.esm.js'], ['GET', '/console/:token'],
    ['GET', '/ping/:token'], ['POST', '/ping/:token'], ['GET', '/ping/:token/fail'], ['POST', '/ping/:token/fail'],
    ['POST', '/in/:slug'], ['GET', '/in/:slug'], ['PUT', '/in/:slug'], ['DELETE', '/in/:slug'], ['OPTIONS', '/in/:slug'], ['POST', '/in/'],
  ].map(([method, path]) => ({ method: method!, path: path!, auth: false })),
  ...([
    ['GET', '/tasks'], ['POST', '/tasks', 'task'], ['DELETE', '/tasks'], ['POST', '/tasks/batch', 'batch'],
    ['GET', '/tasks/:task'], ['PUT', '/tasks/:task', 'taskUpdate'], ['DELETE', '/tasks/:task'], ['POST', '/tasks/:task/trigger', 'trigger'], ['GET', '/tasks/:task/executions'],
    ['GET', '/executions'], ['GET', '/executions/:execution'],
    ['GET', '/schedules'], ['POST', '/schedules', 'schedule'], ['GET', '/schedules/:schedule'], ['PUT', '/schedules/:schedule', 'schedule'],
    ['DELETE', '/schedules/:schedule'], ['POST', '/schedules/:schedule/trigger', 'trigger'], ['GET', '/schedules/:schedule/executions'],
    ['GET', '/monitors'], ['POST', '/monitors', 'monitor'], ['GET', '/monitors/:monitor'], ['PUT', '/monitors/:monitor', 'monitor'], ['DELETE', '/monitors/:monitor'],
    ['POST', '/monitors/:monitor/pause'], ['POST', '/monitors/:monitor/resume'], ['GET', '/monitors/:monitor/pings'],
    ['GET', '/endpoints'], ['POST', '/endpoints', 'endpoint'], ['GET', '/endpoints/:endpoint'], ['PUT', '/endpoints/:endpoint', 'endpoint'], ['DELETE', '/endpoints/:endpoint'],
    ['POST', '/endpoints/:endpoint/pause'], ['POST', '/endpoints/:endpoint/resume'], ['GET', '/endpoints/:endpoint/events'],
    ['GET', '/endpoints/:endpoint/events/:event'], ['POST', '/endpoints/:endpoint/events/:event/replay'],
    ['PUT', '/sync', 'sync'], ['GET', '/organization'], ['PUT', '/organization', 'org'], ['POST', '/organization/webhook-secret/rotate'], ['GET', '/nothing-here'],
  ] as Array<[string, string, Template?]>).map(([method, path, body]) => ({ method, path: `/api/v1${path}`, body, auth: true })),
];

interface Outcome {
  status: number;
  what: string;
  error?: string;
}

describe('hostile input', () => {
  let svc: TestService;
  let api: Api;
  let apiKey: string;
  let otherKey: string;
  let fuzzTarget: Awaited<ReturnType<typeof startTarget>>;
  const ids: Record<IdKind, string[]> = { task: [], execution: [], schedule: [], monitor: [], endpoint: [], event: [], token: [], slug: [] };

  before(async () => {
    svc = await startTestService();
    const org = await svc.createOrg('pro');
    api = org.api;
    apiKey = org.apiKey;
    otherKey = (await svc.createOrg()).apiKey;
    fuzzTarget = await startTarget();
    const created = async (path: string, body: unknown) => {
      const res = await api('POST', path, body);
      assert.ok(res.status === 201, `${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data;
    };
    for (let i = 0; i < 2; i++) {
      const t = await created('/tasks', { url: `${fuzzTarget.url}/t`, delay: '1h' });
      ids.task.push(t.id);
      ids.execution.push(t.last_execution_id);
      ids.schedule.push((await created('/schedules', { url: `${fuzzTarget.url}/s`, cron: '@yearly' })).id);
      const m = await created('/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600 });
      ids.monitor.push(m.id);
      ids.token.push(new URL(m.ping_url).pathname.split('/')[2]!);
      // One endpoint forwards through a Lua verify and transform; the other only collects.
      const e = await created('/endpoints', i === 0
        ? { name: 'lua', forward_urls: [`${fuzzTarget.url}/f`], script: 'function verify(req) return #req.body < 100000 end\nfunction transform(req) return { body = req.body } end' }
        : { name: 'collect' });
      ids.endpoint.push(e.id);
      ids.slug.push(e.slug);
      const received = await fetch(e.inbound_url, { method: 'POST', body: 'seed' });
      ids.event.push(((await received.json()) as { id: string }).id);
    }
  });
  after(async () => {
    await fuzzTarget?.close();
    await svc?.stop();
  });

  /** One route's path with its parameters filled: mostly real ids, often hostile ones. */
  function fillPath(g: Rng, path: string): string {
    let out = path.replace(/:(\w+)/g, (_m, kind: IdKind) => {
      if (g.chance(0.45)) return g.pick(ids[kind]);
      if (g.chance(0.1)) return g.pick(ids[g.pick(Object.keys(ids) as IdKind[])]);
      return g.pick(IDS);
    });
    if (g.chance(0.3)) {
      const pairs = Array.from({ length: 1 + g.int(3) }, () => `${g.pick(QUERY_NAMES)}=${g.pick(QUERY_VALUES)}`);
      out += `?${pairs.join('&')}`;
    }
    if (g.chance(0.03)) out += g.pick(['/', '//', '/extra', '%2F', ';x=1', '#frag']);
    return out;
  }

  function template(kind: Template): Record<string, unknown> {
    const t = fuzzTarget.url;
    switch (kind) {
      case 'task': return { url: `${t}/t`, delay: '1h', name: 'fuzz', headers: { 'X-A': 'b' }, body: { a: [1, 'x'] }, retry_attempts: 1, lane: 'fz', on_failure_url: `${t}/of` };
      case 'taskUpdate': return { name: 'renamed', timeout_ms: 5000, run_at: new Date(Date.now() + 3_600_000).toISOString() };
      case 'trigger': return { callback_url: `${t}/cb` };
      case 'batch': return { lane: 'fzb', delay: '1h', tasks: [{ url: `${t}/b1` }, { url: `${t}/b2`, name: 'b2', body: 'x', headers: { 'X-B': '1' } }], callback_url: `${t}/cb` };
      case 'schedule': return { url: `${t}/s`, cron: '0 0 1 1 *', timezone: 'UTC', name: 'fz', headers: { 'X-S': '1' }, script: 'function on_response(res, task) end' };
      case 'monitor': return { name: 'fzm', schedule_type: 'cron', cron_expression: '@midnight', timezone: 'Europe/Berlin', grace_period_seconds: 60, on_recovery_url: `${t}/r` };
      case 'endpoint': return { name: 'fze', forward_urls: [`${t}/f`], forward_headers: { 'X-F': '1' }, retry_attempts: 0, secrets: { KEY: 'v' } };
      case 'sync': return { schedules: [{ key: 'k1', url: `${t}/sy`, cron: '@yearly', timezone: 'Asia/Tokyo' }], monitors: [{ key: 'm1', name: 'm', schedule_type: 'interval', interval_seconds: 3600 }] };
      case 'org': return { notification_webhook_url: `${t}/n`, notify_on_failure: false, notification_email: 'ops@example.com' };
    }
  }

  /** What fetch and node:http refuse to send: control characters, broken framing. */
  function rawAbuse(g: Rng): Buffer {
    const slug = g.pick(ids.slug);
    return Buffer.from(g.pick([
      'GET /api/v1/tasks/\u0000 HTTP/1.1\r\nHost: x\r\n\r\n',
      `GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\u0000\r\n\r\n`,
      'GET /ping/x HTTP/1.1\r\nHost: x\r\nUser-Agent: a\rb\r\n\r\n',
      'POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
      `POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n`,
      `POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
      `POST /in/${slug} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab\u0000\u00ff\u00fe\r\n0\r\n\r\n`,
      `POST /in/${slug}?a=\u00ff\u00fe HTTP/1.1\r\nHost: x\r\nX-Bin: \u00ff\u00fe\r\nContent-Length: 2\r\n\r\n\u0000\u00ff`,
      `GET /in/${slug} HTTP/1.0\r\n\r\n`,
      'GET / HTTP/9.9\r\nHost: x\r\n\r\n',
      'BREW /coffee HTCPCP/1.0\r\n\r\n',
      `GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      'GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nX-Injected\r\n\r\n',
      `POST /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"url":`,
      `POST /ping/${g.pick(ids.token)} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\u0000\u0000\u00ff\u00fe`,
      '\u0000\u0001\u0002\u0003\r\n\r\n',
    ]), 'latin1');
  }

  /** One hostile request, described so that a failure can be reproduced by hand. */
  function generate(g: Rng): { method: string; path: string; headers: Record<string, string>; body?: Buffer; chunked: boolean } | { raw: Buffer } {
    if (g.chance(0.04)) return { raw: rawAbuse(g) };
    const route = g.pick(ROUTES);
    const method = g.chance(0.05) ? g.pick(METHODS_OTHER) : route.method;
    const path = fillPath(g, route.path);
    const headers: Record<string, string> = {};
    if (route.auth || g.chance(0.1)) {
      const auth = g.chance(0.9) ? `Bearer ${apiKey}` : g.pick(AUTHS(apiKey, otherKey));
      if (auth !== null) headers.Authorization = auth;
    }
    let body: Buffer | undefined;
    const base = template(route.body ?? g.pick(['task', 'sync', 'org'] as const));
    if (route.body || g.chance(0.3)) {
      body = g.chance(0.65) ? Buffer.from(JSON.stringify(route.body && g.chance(0.15) ? base : mutate(g, base))) : hostileBytes(g, base);
      headers['Content-Type'] = g.chance(0.8) ? 'application/json' : g.pick(CONTENT_TYPES);
      const coding = g.int(10);
      if (coding === 0) (body = gzipSync(body)), (headers['Content-Encoding'] = 'gzip');
      else if (coding === 1) (body = deflateSync(body)), (headers['Content-Encoding'] = 'deflate');
      else if (coding === 2) headers['Content-Encoding'] = g.pick(ENCODINGS);
      else if (coding === 3) (body = bomb()), (headers['Content-Encoding'] = 'gzip');
    }
    if (g.chance(0.1)) headers['Idempotency-Key'] = g.pick(['', 'é', 'k'.repeat(300), `k-${g.int(4)}`, ' ']);
    if (g.chance(0.05)) headers['X-Forwarded-For'] = g.pick(['é, 1.2.3.4', 'not-an-ip', '9'.repeat(500), '::1, ::1', '']);
    if (g.chance(0.05)) headers['User-Agent'] = g.pick(['é\u00ff', 'x'.repeat(8000), '']);
    if (g.chance(0.03)) headers.Expect = '100-continue';
    return { method, path, headers, body, chunked: g.chance(0.2) };
  }

  test(`${REQUESTS} seeded hostile requests over every route: none answers 5xx; then a task runs end to end`, async (t) => {
    const g = new Rng(SEED);
    const plan = Array.from({ length: REQUESTS }, () => generate(g));
    const outcomes: Outcome[] = [];
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < plan.length; i = next++) {
        const req = plan[i]!;
        if ('raw' in req) {
          const res = await rawExchange(svc.url, req.raw, 1500);
          outcomes.push({ status: res.status, what: `#${i} raw ${JSON.stringify(req.raw.toString('latin1').slice(0, 120))}` });
          continue;
        }
        const what = `#${i} ${req.method} ${req.path.slice(0, 200)} ${JSON.stringify(req.headers).slice(0, 300)} ${req.body?.toString('latin1').slice(0, 200) ?? ''}`;
        try {
          const res = await rawRequest(svc.url, { ...req, timeoutMs: 15_000 });
          outcomes.push({ status: res.status, what, error: res.status >= 500 ? res.text.slice(0, 300) : undefined });
        } catch (err) {
          // The server may close on an oversized body before it has all been sent.
          outcomes.push({ status: 0, what, error: (err as Error).message });
        }
      }
    };
    const t0 = Date.now();
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const histogram: Record<string, number> = {};
    for (const o of outcomes) histogram[o.status] = (histogram[o.status] ?? 0) + 1;
    const summary = `hostile-input: seed=${SEED} requests=${outcomes.length} in ${Date.now() - t0} ms; statuses ${JSON.stringify(histogram)}`;
    t.diagnostic(summary);
    console.log(summary);

    if (process.env.JETCRON_FUZZ_DEBUG) for (const o of outcomes.filter((x) => x.status === 0)) console.log(o.what.slice(0, 250), o.error ?? '');
    const serverErrors = outcomes.filter((o) => o.status >= 500);
    assert.deepEqual(serverErrors.slice(0, 10), [], `${serverErrors.length} answers were 5xx (seed ${SEED})`);
    // No answer at all is allowed only where the server hangs up on purpose: broken framing,
    // bodies over the limit. A timeout would mean a request stalled the service.
    const stalled = outcomes.filter((o) => o.status === 0 && /no answer within/.test(o.error ?? ''));
    assert.deepEqual(stalled.slice(0, 10), [], `${stalled.length} requests got no answer (seed ${SEED})`);
    assert.ok(outcomes.filter((o) => o.status === 0).length < outcomes.length * 0.05, 'few connections are dropped');

    // Still serving, the projector not wedged: every new resource reads back at once, and a task runs.
    const target = await startTarget();
    try {
      const task = await api('POST', '/tasks', { url: `${target.url}/after-fuzz`, body: { ok: true } });
      assert.equal(task.status, 201, JSON.stringify(task.body));
      for (const [path, body] of [
        ['/schedules', { url: `${target.url}/s`, cron: '@midnight' }],
        ['/monitors', { name: 'after', schedule_type: 'cron', cron_expression: '@hourly' }],
        ['/endpoints', { name: 'after' }],
      ] as const) {
        const made = await api('POST', path, body);
        assert.equal(made.status, 201, `${path}: ${JSON.stringify(made.body)}`);
        // Read back at once: a 200, not a 404 while a projection catches up.
        assert.equal((await api('GET', `${path}/${made.body.data.id}`)).status, 200, path);
      }
      const exe = await eventually(async () => {
        const e = (await api('GET', `/executions/${task.body.data.last_execution_id}`)).body?.data;
        return e && ['success', 'failed', 'timeout'].includes(e.status) ? e : null;
      }, 20_000);
      assert.equal(exe.status, 'success');
      assert.equal(target.received.find((r) => r.path === '/after-fuzz')?.body, '{"ok":true}');
      assert.equal((await api('GET', `/tasks/${task.body.data.id}`)).body.data.status, 'success');
      // The contract's /healthz is 503 while a consumer keeps failing on one event.
      await eventually(async () => (await fetch(`${svc.url}/healthz`)).status === 200, 10_000);
    } finally {
      await target.close();
    }
  });
});
