import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { createApiKey } from '../src/commands/api-key/handlers.ts';
import { createClock } from '../src/lib/clock.ts';
import { newId } from '../src/lib/ids.ts';
import { encodeJson } from '../src/lib/json.ts';
import { apiClient } from './support/service.ts';
import { connectNats } from '../src/nats/connection.ts';
import { runitor } from './support/runitor-like.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// interval 60 s → 600 ms; max_duration 60 s → 600 ms.
const SCALE = 0.01;
const sh = promisify(execFile);

describe('heartbeats: Healthchecks-compatible pings', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg('pro')).api;
  });
  after(() => svc.stop());

  const monitor = async (fields: Record<string, unknown> = {}) =>
    (await api('POST', '/monitors', { name: `m-${randomUUID().slice(0, 8)}`, schedule_type: 'interval', interval_seconds: 3600, ...fields })).body.data;
  const pings = async (id: string) => (await api('GET', `/monitors/${id}/pings?limit=100`)).body.data as any[];
  const get = async (id: string) => (await api('GET', `/monitors/${id}`)).body.data;
  const send = async (url: string, init: RequestInit = {}) => {
    const r = await fetch(url, init);
    const text = await r.text();
    return { status: r.status, headers: r.headers, body: text ? JSON.parse(text) : null };
  };

  test('each suffix and method: kind and exit status recorded, Ping-Body-Limit on every answer; others 400/404/405 and nothing recorded', async () => {
    const m = await monitor();
    for (const [suffix, method] of [['', 'GET'], ['/start', 'POST'], ['/log', 'HEAD'], ['/0', 'POST'], ['/fail', 'GET'], ['/7', 'POST'], ['', 'HEAD']] as const) {
      const r = await send(`${m.ping_url}${suffix}`, { method });
      assert.equal(r.status, 200, `${method} ${suffix}`);
      assert.equal(r.headers.get('ping-body-limit'), '102400');
      if (method === 'HEAD') assert.equal(r.body, null);
      else assert.equal(r.body.monitor, m.name);
    }
    for (const [suffix, status] of [['/256', 400], ['/-1', 404], ['/restart', 404], ['?rid=nope', 400], ['/start/x', 404]] as const) {
      const r = await send(`${m.ping_url}${suffix}`);
      assert.equal(r.status, status, suffix);
      assert.equal(r.headers.get('ping-body-limit'), '102400');
    }
    const put = await send(m.ping_url, { method: 'PUT' });
    assert.equal(put.status, 405);
    assert.match(put.headers.get('allow') ?? '', /GET, HEAD, POST/);
    const rows = (await pings(m.id)).reverse();
    assert.deepEqual(rows.map((p) => [p.method, p.kind, p.exit_status]), [
      ['GET', 'success', null], ['POST', 'start', null], ['HEAD', 'log', null], ['POST', 'exit', 0], ['GET', 'fail', null], ['POST', 'exit', 7], ['HEAD', 'success', null],
    ]);
    assert.equal(rows[3].duration_ms !== null, true, '/0 closed the start');
  });

  test('the POST body is stored, cut at 100 KB', async () => {
    const m = await monitor();
    assert.equal((await send(m.ping_url, { method: 'POST', body: 'x'.repeat(150 * 1024), headers: { 'Content-Type': 'text/plain' } })).status, 200);
    assert.equal((await send(`${m.ping_url}/log`, { method: 'POST', body: 'line one\nline two' })).status, 200);
    const [log, big] = await pings(m.id);
    assert.equal(big.body.length, 100 * 1024);
    assert.equal(log.body, 'line one\nline two');
    assert.equal(log.kind, 'log');
    assert.equal((await get(m.id)).last_ping_at, big.received_at, '/log changes nothing');
  });

  test('two overlapping runs with rid: each timed from its own start', async () => {
    const m = await monitor();
    const [a, b] = [randomUUID(), randomUUID()];
    await send(`${m.ping_url}/start?rid=${a}`, { method: 'POST' });
    await send(`${m.ping_url}/start?rid=${b}`, { method: 'POST' });
    await send(`${m.ping_url}/0?rid=${b}`, { method: 'POST' });
    await send(`${m.ping_url}?rid=${a}`, { method: 'POST' });
    // An end whose rid matches no open start closes nothing.
    await send(`${m.ping_url}/0?rid=${randomUUID()}`, { method: 'POST' });
    const rows = (await pings(m.id)).reverse();
    const at = (p: any) => Date.parse(p.received_at);
    assert.deepEqual(rows.map((p) => p.rid), [a, b, b, a, rows[4].rid]);
    assert.equal(rows[2].duration_ms, at(rows[2]) - at(rows[1]));
    assert.equal(rows[3].duration_ms, at(rows[3]) - at(rows[0]));
    assert.ok(rows[3].duration_ms >= rows[2].duration_ms);
    assert.equal(rows[4].duration_ms, null);
    assert.equal((await get(m.id)).status, 'up');
  });

  test('exit status 0 is up, non-zero down with exit_status; too long and too fast go down, notifications carry the reason', async () => {
    const hook = await startTarget();
    try {
      const { api: org } = await svc.createOrg('pro');
      await org('PUT', '/organization', { notification_webhook_url: `${hook.url}/org` });
      const make = async (fields: Record<string, unknown>) => (await org('POST', '/monitors', { name: `n-${randomUUID().slice(0, 6)}`, schedule_type: 'interval', interval_seconds: 3600, ...fields })).body.data;
      const downs = (id: string) => hook.received.filter((r) => r.path === '/org').map((r) => JSON.parse(r.body)).filter((e) => e.monitor.id === id && e.event === 'monitor.down');

      const exit = await make({});
      assert.equal((await send(`${exit.ping_url}/0`)).body.status, 'up');
      assert.equal((await send(`${exit.ping_url}/3`, { method: 'POST', body: 'disk full' })).body.status, 'down');
      assert.equal((await org('GET', `/monitors/${exit.id}`)).body.data.down_reason, 'exit_status');
      const [e1] = await eventually(async () => downs(exit.id).length === 1 && downs(exit.id));
      assert.equal(e1.monitor.down_reason, 'exit_status');
      assert.equal(e1.monitor.exit_status, 3);
      assert.match(e1.text, /exited with status 3/);

      // 60 s scaled: 600 ms after the start it is too long.
      const long = await make({ max_duration_seconds: 60 });
      await send(`${long.ping_url}/start`, { method: 'POST' });
      const [e2] = await eventually(async () => downs(long.id).length === 1 && downs(long.id));
      assert.equal(e2.monitor.down_reason, 'too_long');
      assert.match(e2.text, /did not end in time/);
      await eventually(async () => (await org('GET', `/monitors/${long.id}`)).body.data.down_reason === 'too_long');
      // Its late end is still timed, and recovers the monitor.
      assert.equal((await send(`${long.ping_url}/0`, { method: 'POST' })).body.status, 'up');
      assert.ok((await org('GET', `/monitors/${long.id}/pings`)).body.data[0].duration_ms >= 600);

      // A day scaled is 864 s: a run that ends right after its start is too fast.
      const fast = await make({ min_duration_seconds: 86400 });
      await send(`${fast.ping_url}/start`, { method: 'POST' });
      assert.equal((await send(fast.ping_url, { method: 'POST' })).body.status, 'down');
      const [e3] = await eventually(async () => downs(fast.id).length === 1 && downs(fast.id));
      assert.equal(e3.monitor.down_reason, 'too_fast');
      assert.equal(typeof e3.monitor.duration_ms, 'number');

      const failed = await make({});
      await send(`${failed.ping_url}/fail`);
      const [e4] = await eventually(async () => downs(failed.id).length === 1 && downs(failed.id));
      assert.equal(e4.monitor.down_reason, 'failed');
      const missed = await make({ interval_seconds: 60, grace_period_seconds: 0 });
      await send(missed.ping_url);
      const [e5] = await eventually(async () => downs(missed.id).length === 1 && downs(missed.id));
      assert.equal(e5.monitor.down_reason, 'missed');
      // A start and a log line on a down monitor leave it down: no recovery.
      await send(`${missed.ping_url}/start`);
      await send(`${missed.ping_url}/log`);
      assert.equal((await org('GET', `/monitors/${missed.id}`)).body.data.status, 'down');
    } finally {
      await hook.close();
    }
  });

  test('ping key + slug, create=1 (201, daily, grace 1 h), key rotation', async () => {
    const { api: org } = await svc.createOrg();
    const key = (await org('GET', '/organization')).body.data.ping_key;
    assert.match(key, /^ppk_[0-9a-z]{22}$/);
    const base = `${svc.url}/ping/${key}`;
    assert.equal((await send(`${base}/backup`)).status, 404);
    const created = await send(`${base}/backup/start?create=1&rid=${randomUUID()}`, { method: 'POST' });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { monitor: 'backup', status: 'new' });
    const list = (await org('GET', '/monitors')).body.data;
    assert.equal(list.length, 1);
    assert.deepEqual([list[0].slug, list[0].schedule_type, list[0].interval_seconds, list[0].grace_period_seconds], ['backup', 'interval', 86400, 3600]);
    assert.equal((await send(`${base}/backup/0?create=1`)).status, 200, 'exists now: 200, no second monitor');
    assert.equal((await org('GET', '/monitors')).body.data.length, 1);
    assert.equal((await send(`${base}/backup`, { method: 'HEAD' })).status, 200);
    assert.equal((await send(`${base}/Bad%20Slug?create=1`)).status, 400);
    // A slug is unique in the organization.
    const other = await org('POST', '/monitors', { name: 'x', schedule_type: 'interval', interval_seconds: 3600, slug: 'backup' });
    assert.equal(other.status, 422);
    assert.equal(other.body.error.field, 'slug');
    // Renamed: the old name is gone, the new one pings it.
    await org('PUT', `/monitors/${list[0].id}`, { slug: 'db-backup' });
    assert.equal((await send(`${base}/backup`)).status, 404);
    assert.equal((await send(`${base}/db-backup`)).status, 200);

    const rotated = await org('POST', '/organization/ping-key/rotate');
    assert.equal(rotated.status, 200);
    const newKey = rotated.body.data.ping_key;
    assert.notEqual(newKey, key);
    assert.equal((await send(`${base}/db-backup`)).status, 404, 'the old key no longer pings');
    assert.equal((await send(`${svc.url}/ping/${newKey}/db-backup`)).status, 200);
    assert.equal((await org('GET', '/organization')).body.data.ping_key, newKey);
  });

  test('sync: a monitor key is its slug', async () => {
    const { api: org } = await svc.createOrg();
    const key = (await org('GET', '/organization')).body.data.ping_key;
    const r = await org('PUT', '/sync', { monitors: [{ key: 'nightly-db', name: 'Nightly DB', schedule_type: 'interval', interval_seconds: 86400 }, { key: 'weekly', name: 'W', schedule_type: 'interval', interval_seconds: 604800, slug: 'weekly-report', max_duration_seconds: 600 }] });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await send(`${svc.url}/ping/${key}/nightly-db/start`)).status, 200);
    assert.equal((await send(`${svc.url}/ping/${key}/weekly-report`)).status, 200);
    assert.equal((await send(`${svc.url}/ping/${key}/weekly`)).status, 404);
    const again = await org('PUT', '/sync', { monitors: [{ key: 'nightly-db', name: 'Nightly DB', schedule_type: 'interval', interval_seconds: 86400 }, { key: 'weekly', name: 'W', schedule_type: 'interval', interval_seconds: 604800, slug: 'weekly-report', max_duration_seconds: 600 }] });
    assert.deepEqual(again.body.data.monitors, { created: 0, updated: 0, unchanged: 2, deleted: 0 });
  });

  test('curl as a crontab runs it, and runitor (what it sends), by token and by key + slug with -create', async () => {
    const m = await monitor();
    const curl = '-fsS -m 10 --retry 5 -o /dev/null';
    await sh('bash', ['-c', `curl ${curl} "$URL/start" && out=$(echo backup done; exit 0); curl ${curl} --data-raw "$out" "$URL/$?"`], { env: { ...process.env, URL: m.ping_url } });
    const rows = await pings(m.id);
    assert.deepEqual(rows.map((p) => p.kind), ['exit', 'start']);
    assert.equal(rows[0].body, 'backup done');
    assert.equal(typeof rows[0].duration_ms, 'number');
    assert.match(rows[0].user_agent, /^curl\//);

    const ok = await runitor({ apiUrl: `${svc.url}/ping`, handle: new URL(m.ping_url).pathname.split('/').pop()!, command: 'echo hello; echo oops >&2' });
    assert.deepEqual([ok.exitCode, ok.startStatus, ok.endStatus, ok.bodyLimit], [0, 200, 200, 102400]);
    const failing = await runitor({ apiUrl: `${svc.url}/ping`, handle: new URL(m.ping_url).pathname.split('/').pop()!, command: 'echo broken; exit 2' });
    assert.equal(failing.endStatus, 200);
    const [end2, start2, end1, start1] = await pings(m.id);
    assert.deepEqual([start1.kind, end1.kind, start2.kind, end2.kind], ['start', 'success', 'start', 'exit']);
    assert.deepEqual([start1.rid, end1.rid, start2.rid, end2.rid], [ok.rid, ok.rid, failing.rid, failing.rid]);
    assert.equal(end1.body, 'hello\noops\n');
    assert.equal(end2.exit_status, 2);
    assert.match(end2.body, /^broken\n/);
    assert.match(end1.user_agent, /^runitor\//);
    assert.equal((await get(m.id)).down_reason, 'exit_status');

    const { api: org } = await svc.createOrg();
    const key = (await org('GET', '/organization')).body.data.ping_key;
    const made = await runitor({ apiUrl: `${svc.url}/ping`, handle: `${key}/cron-job`, create: true, command: 'true' });
    assert.deepEqual([made.startStatus, made.endStatus], [201, 200]);
    const [created] = (await org('GET', '/monitors')).body.data;
    assert.equal(created.slug, 'cron-job');
    assert.equal(created.status, 'up');
  });

  test('a restart in the middle of an open run still catches too_long', async () => {
    const m = await monitor({ max_duration_seconds: 300 }); // 3 s scaled
    const start = await send(`${m.ping_url}/start`, { method: 'POST' });
    assert.equal(start.status, 200);
    const startedAt = Date.parse((await pings(m.id))[0].received_at);
    await svc.stopService();
    // Down while no scheduler runs: the limit passes with the service stopped.
    await eventually(async () => Date.now() > startedAt + 3000, 30_000);
    await svc.startService();
    await eventually(async () => (await get(m.id)).down_reason === 'too_long', 20_000);
    assert.equal((await get(m.id)).status, 'down');
  });

  test('events written before heartbeats stay readable, and a rebuild gives the same answers', async () => {
    const { api: org, orgId } = await svc.createOrg();
    // A monitor as the previous version wrote it: no runs, no durations, no slug, no down_reason, pings of kind `ping`.
    const id = `mon_${Date.now().toString(36)}legacy0000`;
    const token = `pm_${'a'.repeat(20)}${Date.now().toString(36).padStart(12, '0').slice(-12)}`;
    const t0 = Date.now() - 60_000;
    const at = (ms: number) => new Date(t0 + ms).toISOString();
    const legacy = {
      id, org_id: orgId, token, name: 'old backup', schedule_type: 'interval', interval_seconds: 3600, cron_expression: null, timezone: 'UTC',
      grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null,
      sync_key: 'old-backup', status: 'new', paused: false, last_ping_at: null, next_expected_at: null, deadline_at: null, created_at: at(0), updated_at: at(0),
    };
    const oldPing = (n: number, kind: string) => ({ id: `png_legacy${n}${Date.now().toString(36)}`, received_at: at(n * 1000), kind, method: 'GET', source_ip: '10.0.0.1', user_agent: 'curl/7', body: '' });
    const nats = await connectNats(svc.natsUrl, 'legacy events');
    try {
      const subject = `evt.${orgId}.monitor.${id}`;
      // Stored as that version stored them: no `v` (the event store adds today's).
      const append = (event: { id: string }, expectLastSubjectSeq: number) => nats.publish(subject, encodeJson(event), { msgId: event.id, expectLastSubjectSeq });
      const e = (type: string, n: number, data: object) => ({ type, id: `evt_legacy_${n}_${id}`, at: at(n * 1000), org_id: orgId, data });
      let seq = await append(e('MonitorCreated', 0, { monitor: legacy }), 0);
      const up = { ...legacy, status: 'up', last_ping_at: at(1000), next_expected_at: at(3_601_000), deadline_at: at(3_901_000), updated_at: at(1000) };
      seq = await append(e('MonitorPinged', 1, { monitor: up, ping: oldPing(1, 'ping'), previous_status: 'new' }), seq);
      await append(e('MonitorWentDown', 2, { monitor: { ...up, status: 'down', deadline_at: null, last_ping_at: at(2000), updated_at: at(2000) }, reason: 'fail_signal', ping: oldPing(2, 'fail') }), seq);
    } finally {
      await nats.close();
    }
    // Written behind the API's back: wait until the projector has the last of them.
    const old = await eventually(async () => {
      const data = (await org('GET', `/monitors/${id}`)).body.data;
      return data?.updated_at === at(2000) && data;
    });
    assert.deepEqual([old.status, old.down_reason, old.slug, old.max_duration_seconds], ['down', 'failed', 'old-backup', null]);
    assert.deepEqual((await org('GET', `/monitors/${id}/pings`)).body.data.map((p: any) => [p.kind, p.exit_status, p.rid, p.duration_ms]), [['fail', null, null, null], ['success', null, null, null]]);

    // New pings on it, and monitors of this version with runs, a run too long, a run too fast.
    const key = (await org('GET', '/organization')).body.data.ping_key;
    assert.equal((await send(`${svc.url}/ping/${key}/old-backup/start`)).status, 200, 'its sync key is its slug');
    assert.equal((await send(`${old.ping_url}/0`, { method: 'POST', body: 'ok' })).body.status, 'up');
    const made: Array<{ id: string; ping_url: string }> = [];
    for (const fields of [{ max_duration_seconds: 60 }, { min_duration_seconds: 86400 }, {}]) {
      made.push((await org('POST', '/monitors', { name: `r-${made.length}`, schedule_type: 'interval', interval_seconds: 3600, ...fields })).body.data);
    }
    await send(`${made[0]!.ping_url}/start`);
    await eventually(async () => (await org('GET', `/monitors/${made[0]!.id}`)).body.data.down_reason === 'too_long');
    await send(`${made[1]!.ping_url}/start`);
    await send(`${made[1]!.ping_url}/0`);
    const rid = randomUUID();
    await send(`${made[2]!.ping_url}/start?rid=${rid}`);
    await send(`${made[2]!.ping_url}/4?rid=${rid}`, { method: 'POST', body: 'exit 4' });

    const snapshot = async () => {
      const monitors = (await org('GET', '/monitors')).body.data.map((m: any) => ({ ...m, ping_url: new URL(m.ping_url).pathname }));
      const pingsOf = [];
      for (const m of monitors) pingsOf.push((await org('GET', `/monitors/${m.id}/pings`)).body.data);
      return { monitors, pingsOf, organization: (await org('GET', '/organization')).body.data };
    };
    const before = await snapshot();
    assert.deepEqual(before.monitors.map((m: any) => m.down_reason).sort(), ['exit_status', 'too_fast', 'too_long', null].sort());
    await svc.stopService();
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
    await svc.startService();
    assert.deepEqual(await snapshot(), before);
  });

  test('an organization created before heartbeats gets its ping key when first shown, and keeps it', async () => {
    const orgId = newId('org');
    const nats = await connectNats(svc.natsUrl, 'legacy organization');
    let apiKey: string;
    try {
      const store = createEventStore(nats);
      const now = new Date().toISOString();
      const organization = {
        id: orgId, name: 'before', plan: 'free', webhook_secret: 'whsec_b2xk', notification_email: null, notification_webhook_url: null,
        notify_on_failure: true, notify_on_recovery: true, created_at: now, updated_at: now,
      };
      await store.append(`evt.${orgId}.org`, { type: 'OrganizationCreated', id: `evt_legacy_org_${orgId}`, at: now, org_id: orgId, data: { organization } } as never, 0);
      ({ apiKey } = await createApiKey({ store, clock: createClock(1) }, orgId));
    } finally {
      await nats.close();
    }
    const org = apiClient(() => svc.url, apiKey);
    const first = (await org('GET', '/organization')).body.data.ping_key;
    assert.match(first, /^ppk_[0-9a-z]{22}$/);
    assert.equal((await org('GET', '/organization')).body.data.ping_key, first, 'issued once');
    await org('POST', '/monitors', { name: 'm', schedule_type: 'interval', interval_seconds: 3600, slug: 'm' });
    assert.equal((await send(`${svc.url}/ping/${first}/m`)).status, 200);
  });

  // Pings by token are taken ahead of express (src/http/ping-receiver.ts); the same URL
  // with an empty query part (`?`, or a trailing `&`) is not, and goes through express's
  // ping routes. Each request is sent both ways, one after the other, to one monitor:
  // the answers must be the same, to the header.
  const HEADERS = ['content-type', 'content-length', 'ping-body-limit', 'allow', 'retry-after'];
  const viaExpress = (url: string) => (url.includes('?') ? `${url}&` : `${url}?`);
  const answer = async (url: string, init: RequestInit) => {
    const r = await fetch(url, init);
    return { status: r.status, headers: HEADERS.map((h) => [h, r.headers.get(h)]), body: await r.text() };
  };
  const both = async (url: string, init: RequestInit = {}) => {
    const fast = await answer(url, init);
    const express = await answer(viaExpress(url), init);
    assert.deepEqual(fast, express, `${init.method ?? 'GET'} ${url}`);
    return fast;
  };

  test('pings ahead of express answer as the express routes do: every signal and method, the refusals, a paused monitor, an unknown token; the ping rows alike', async () => {
    const m = (await api('POST', '/monitors', { name: `m-${randomUUID().slice(0, 8)}`, schedule_type: 'interval', interval_seconds: 3600 })).body.data;
    const rid = randomUUID();
    const sent: Array<[string, RequestInit, number]> = [
      ['', { method: 'GET' }, 200],
      ['', { method: 'HEAD' }, 200],
      ['', { method: 'POST', body: 'job output', headers: { 'Content-Type': 'text/plain', 'User-Agent': 'runitor/v1.3.0' } }, 200],
      [`/start?rid=${rid}`, { method: 'POST' }, 200],
      [`/0?rid=${rid}`, { method: 'POST', body: 'done' }, 200],
      ['/log', { method: 'POST', body: 'a line' }, 200],
      ['/fail', { method: 'GET' }, 200],
      ['/7', { method: 'POST' }, 200],
      ['/256', { method: 'GET' }, 400],
      ['?rid=nope', { method: 'GET' }, 400],
      ['', { method: 'PUT' }, 405],
    ];
    for (const [suffix, init, status] of sent) assert.equal((await both(`${m.ping_url}${suffix}`, init)).status, status, suffix);
    const unknown = m.ping_url.replace(/pm_[0-9a-z]{32}/, `pm_${'0'.repeat(32)}`);
    assert.equal((await both(unknown)).status, 404);
    await api('POST', `/monitors/${m.id}/pause`);
    const paused = await both(m.ping_url);
    assert.equal(paused.status, 410);
    assert.equal(JSON.parse(paused.body).monitor, m.name);

    const rows = ((await api('GET', `/monitors/${m.id}/pings?limit=100`)).body.data as any[]).reverse();
    assert.equal(rows.length, 16, 'each accepted ping twice');
    for (let i = 0; i < rows.length; i += 2) {
      const [fast, express] = [rows[i], rows[i + 1]];
      for (const field of ['kind', 'exit_status', 'method', 'source_ip', 'user_agent', 'body']) assert.deepEqual(fast[field], express[field], `${field} of ping ${i / 2}`);
      assert.equal(fast.rid, express.rid);
    }
    assert.notEqual(rows[8].duration_ms, null, 'the first /0 closed its start');
  });
});
