import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import { loadConfig } from '../src/config.ts';
import { encodeRecord, idempotencyKvKey, requestFingerprint, STALE_AFTER_MS } from '../src/http/idempotency.ts';
import { connectNats } from '../src/nats/connection.ts';
import { createTask } from '../src/commands/task/handlers.ts';
import { createSchedule } from '../src/commands/schedule/handlers.ts';
import { createEndpoint } from '../src/commands/endpoint/handlers.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { createClock } from '../src/lib/clock.ts';
import { derivedId } from '../src/lib/ids.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { apiClient, startTestService, type Api, type TestService, secondLog } from './support/service.ts';

// Targets are never called: every task here is created disabled.
const task = (name: string) => ({ url: 'http://127.0.0.1:9/never', name, enabled: false });

describe('Idempotency-Key', () => {
  let svc: TestService;
  let second: Running;

  before(async () => {
    svc = await startTestService();
    // A second API process on the same NATS and Postgres.
    const config = loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, PORT: '0', JETCRON_RATE_LIMIT_FREE: '0', JETCRON_RATE_LIMIT_PRO: '0' },
      { roles: 'api', dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-idem-api2-')) },
    );
    second = await serve(config, secondLog);
  });
  after(async () => {
    await second?.stop();
    await svc?.stop();
  });

  const count = async (api: Api) => {
    const res = await api('GET', '/tasks');
    assert.equal(res.status, 200);
    return (res.body.data as unknown[]).length;
  };
  const post = (api: Api, body: unknown, key: string) => api('POST', '/tasks', body, { 'Idempotency-Key': key });

  test('the same key twice creates one task; the repeat replays the first answer', async () => {
    const { api } = await svc.createOrg();
    const key = randomUUID();
    const first = await post(api, task('once'), key);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const again = await post(api, task('once'), key);
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.body, first.body);
    assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
    assert.equal(await count(api), 1);
  });

  test('20 concurrent requests with one key create exactly one task', async () => {
    const { api } = await svc.createOrg();
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, () => post(api, task('concurrent'), key)));
    const created = results.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    const replayed = results.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === 'true');
    const inFlight = results.filter((r) => r.status === 409);
    assert.equal(created.length, 1, results.map((r) => r.status).join(','));
    assert.equal(created.length + replayed.length + inFlight.length, 20);
    for (const r of replayed) assert.deepEqual(r.body, created[0]!.body);
    for (const r of inFlight) assert.deepEqual(r.body, { error: { message: 'Request in progress', field: null } });
    assert.equal(await count(api), 1);
    // Once the first is done, every repeat is a replay.
    const later = await post(api, task('concurrent'), key);
    assert.equal(later.headers.get('idempotent-replayed'), 'true');
    assert.equal(later.body.data.id, created[0]!.body.data.id);
  });

  test('a refused first request releases the key; the corrected retry creates the task', async () => {
    const { api } = await svc.createOrg();
    const key = randomUUID();
    const bad = await post(api, { name: 'no url', enabled: false }, key);
    assert.equal(bad.status, 422, JSON.stringify(bad.body));
    assert.equal(bad.headers.get('idempotent-replayed'), null);
    const good = await post(api, task('fixed'), key);
    assert.equal(good.status, 201, JSON.stringify(good.body));
    assert.equal(good.headers.get('idempotent-replayed'), null);
    assert.equal(await count(api), 1);
    // A body that is not JSON fails before the key is taken; the key still works afterwards.
    const key2 = randomUUID();
    const notJson = await api('POST', '/tasks', '{nope', { 'Idempotency-Key': key2 });
    assert.equal(notJson.status, 400);
    assert.equal((await post(api, task('after-400'), key2)).status, 201);
    assert.equal(await count(api), 2);
  });

  test('the same key with a different request is 422', async () => {
    const { api } = await svc.createOrg();
    const key = randomUUID();
    assert.equal((await post(api, task('first'), key)).status, 201);
    const other = await post(api, task('second'), key);
    assert.equal(other.status, 422);
    assert.deepEqual(other.body, { error: { message: 'Idempotency-Key was used with a different request', field: 'Idempotency-Key' } });
    assert.equal(await count(api), 1);
  });

  test('keys belong to an organization', async () => {
    const a = (await svc.createOrg()).api;
    const b = (await svc.createOrg()).api;
    const key = randomUUID();
    const ra = await post(a, task('shared-key'), key);
    const rb = await post(b, task('shared-key'), key);
    assert.equal(ra.status, 201);
    assert.equal(rb.status, 201);
    assert.equal(rb.headers.get('idempotent-replayed'), null);
    assert.notEqual(ra.body.data.id, rb.body.data.id);
    assert.equal(await count(a), 1);
    assert.equal(await count(b), 1);
  });

  test('two API processes share the keys: concurrent requests across both create one task', async () => {
    const { apiKey } = await svc.createOrg();
    const a = apiClient(() => svc.url, apiKey);
    const b = apiClient(() => second.url!, apiKey);
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => post(i % 2 ? a : b, task('cluster'), key)));
    const created = results.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    assert.equal(created.length, 1, results.map((r) => r.status).join(','));
    assert.ok(results.every((r) => r.status === 201 || r.status === 409), results.map((r) => r.status).join(','));
    // A replay from the other process answers the same task.
    const replayedA = await post(a, task('cluster'), key);
    const replayedB = await post(b, task('cluster'), key);
    assert.equal(replayedA.body.data.id, created[0]!.body.data.id);
    assert.equal(replayedB.body.data.id, created[0]!.body.data.id);
    assert.equal(await count(a), 1);
  });

  test('a bad header value is 400 with field Idempotency-Key; no header passes through', async () => {
    const { api } = await svc.createOrg();
    for (const bad of ['x'.repeat(256), 'has space', 'tab\there', 'ünï']) {
      const res = await api('POST', '/tasks', task('bad-key'), { 'Idempotency-Key': bad });
      assert.equal(res.status, 400, `${JSON.stringify(bad)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.field, 'Idempotency-Key');
    }
    // An empty value (fetch sends it) is refused too.
    const empty = await api('POST', '/tasks', task('bad-key'), { 'Idempotency-Key': '' });
    assert.equal(empty.status, 400);
    assert.equal((await post(api, task('max-length'), 'k'.repeat(255))).status, 201);
    assert.equal((await api('POST', '/tasks', task('no-key'))).status, 201);
    assert.equal((await api('POST', '/tasks', task('no-key'))).status, 201);
    assert.equal(await count(api), 3);
  });

  test('an in-flight record left by a crashed process is taken over after it goes stale', async () => {
    const { api, orgId } = await svc.createOrg();
    const nats = await connectNats(svc.natsUrl, 'test idempotency');
    try {
      const kv = await new Kvm(nats.nc).open(KV_BUCKETS.idempotency.name);
      const fresh = randomUUID();
      const stale = randomUUID();
      // The records a process leaves when it dies between taking a key and answering.
      const fingerprint = (body: unknown) => requestFingerprint('POST', '/api/v1/tasks', Buffer.from(JSON.stringify(body)));
      const inFlight = (body: unknown, startedMs: number) =>
        encodeRecord({ state: 'in_flight', fingerprint: fingerprint(body), started_at: new Date(startedMs).toISOString() });
      await kv.put(idempotencyKvKey(orgId, fresh), inFlight(task('fresh'), Date.now()));
      await kv.put(idempotencyKvKey(orgId, stale), inFlight(task('crashed'), Date.now() - STALE_AFTER_MS - 1000));
      // A recent one is still in progress as far as anyone can tell.
      const busy = await post(api, task('fresh'), fresh);
      assert.equal(busy.status, 409, JSON.stringify(busy.body));
      // A stale one is free again, even for a request that differs from the lost one.
      const taken = await post(api, task('taken-over'), stale);
      assert.equal(taken.status, 201, JSON.stringify(taken.body));
      assert.equal(taken.headers.get('idempotent-replayed'), null);
      assert.equal((await post(api, task('taken-over'), stale)).headers.get('idempotent-replayed'), 'true');
      assert.equal(await count(api), 1);
    } finally {
      await nats.close();
    }
  });

  test('a create whose process died after appending its task is not run twice when the key goes stale', async () => {
    const { api, orgId } = await svc.createOrg();
    const nats = await connectNats(svc.natsUrl, 'test idempotency crash');
    try {
      const kv = await new Kvm(nats.nc).open(KV_BUCKETS.idempotency.name);
      const key = randomUUID();
      const body = task('appended-then-crashed');
      const kvKey = idempotencyKvKey(orgId, key);
      const startedMs = Date.now() - STALE_AFTER_MS - 1000;
      // What a process leaves when it dies after its TaskCreated was stored but before it
      // answered: the in-flight record, and the task under the id the key derives.
      await kv.put(kvKey, encodeRecord({ state: 'in_flight', fingerprint: requestFingerprint('POST', '/api/v1/tasks', Buffer.from(JSON.stringify(body))), started_at: new Date(startedMs).toISOString() }));
      const crashedId = derivedId('tsk', startedMs, kvKey, 0);
      const stored = await createTask({ store: createEventStore(nats), clock: createClock(1) }, orgId, body, crashedId);
      assert.equal(stored.state!.id, crashedId);

      const retried = await post(api, body, key);
      assert.equal(retried.status, 201, JSON.stringify(retried.body));
      assert.equal(retried.body.data.id, crashedId, 'the retry answers with the task the crashed request stored');
      assert.equal(retried.body.data.last_execution_id, stored.state!.pending_execution!.id);
      assert.equal(await count(api), 1);
      assert.equal((await post(api, body, key)).headers.get('idempotent-replayed'), 'true');
      assert.equal(await count(api), 1);
    } finally {
      await nats.close();
    }
  });

  test('schedules and endpoints: a create whose process died after storing it is not run twice', async () => {
    const { api, orgId } = await svc.createOrg();
    const nats = await connectNats(svc.natsUrl, 'test idempotency crash 2');
    try {
      const kv = await new Kvm(nats.nc).open(KV_BUCKETS.idempotency.name);
      const deps = { store: createEventStore(nats), clock: createClock(1) };
      const free = { name: 'Free', limit: 10, live: [] };
      const cases = [
        { path: '/schedules', prefix: 'sch' as const, body: { url: 'http://127.0.0.1:9/never', cron: '0 0 1 1 *', enabled: false, name: 'crashed-schedule' },
          store: (id: string) => createSchedule(deps, orgId, { url: 'http://127.0.0.1:9/never', cron: '0 0 1 1 *', enabled: false, name: 'crashed-schedule' }, free, id) },
        { path: '/endpoints', prefix: 'ep' as const, body: { name: 'crashed-endpoint', forward_urls: [] },
          store: (id: string) => createEndpoint(deps, orgId, { name: 'crashed-endpoint', forward_urls: [] }, null, { ...free, limit: 3 }, id) },
      ];
      for (const c of cases) {
        const key = randomUUID();
        const kvKey = idempotencyKvKey(orgId, key);
        const startedMs = Date.now() - STALE_AFTER_MS - 1000;
        // What the dead request left: its in-flight record, and its resource under the id the key derives.
        await kv.put(kvKey, encodeRecord({ state: 'in_flight', fingerprint: requestFingerprint('POST', `/api/v1${c.path}`, Buffer.from(JSON.stringify(c.body))), started_at: new Date(startedMs).toISOString() }));
        const crashedId = derivedId(c.prefix, startedMs, kvKey, 0);
        assert.equal((await c.store(crashedId)).state!.id, crashedId);
        const retried = await api('POST', c.path, c.body, { 'Idempotency-Key': key });
        assert.equal(retried.status, 201, JSON.stringify(retried.body));
        assert.equal(retried.body.data.id, crashedId, `${c.path}: the retry answers with what the crashed request stored`);
        const list = (await api('GET', c.path)).body.data as Array<{ id: string }>;
        assert.equal(list.length, 1, `${c.path}: one, not two`);
      }
    } finally {
      await nats.close();
    }
  });

  test('the OpenAPI document lists the header on POST /tasks', async () => {
    const doc = (await (await fetch(`${svc.url}/api/v1/openapi.json`)).json()) as any;
    const params = doc.paths['/tasks'].post.parameters as Array<{ name: string; in: string }>;
    assert.ok(params.some((p) => p.name === 'Idempotency-Key' && p.in === 'header'));
  });
});
