import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { revokeApiKey } from '../src/commands/api-key/handlers.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { createClock } from '../src/lib/clock.ts';
import { connectNats } from '../src/nats/connection.ts';
import { apiClient, eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget } from './support/target.ts';

const ORG_FIELDS = [
  'id', 'name', 'plan', 'webhook_secret', 'notification_email', 'notification_webhook_url', 'notify_on_failure', 'notify_on_recovery',
];

// Free organizations get 5 requests/s (burst 10); Pro ones are unlimited, so every
// test but the rate-limit one uses a Pro organization.
describe('authentication, organization and service endpoints', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  let apiKey: string;
  const raw = (path: string, headers: Record<string, string> = {}) => fetch(`${svc.url}${path}`, { headers });
  const withKey = (key: string | null) => apiClient(() => svc.url, key);

  before(async () => {
    svc = await startTestService({ JETCRON_RATE_LIMIT_FREE: '5', JETCRON_RATE_LIMIT_PRO: '0' });
    ({ api, orgId, apiKey } = await svc.createOrg('pro'));
  });
  after(() => svc?.stop());

  const assert401 = (res: { status: number; body: any }) => {
    assert.equal(res.status, 401);
    assert.equal(typeof res.body.error.message, 'string');
    assert.equal(res.body.error.field, null);
  };

  test('a key works right after it was created', async () => {
    const res = await api('GET', '/organization');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.id, orgId);
  });

  test('no Authorization header is 401', async () => {
    assert401(await withKey(null)('GET', '/tasks'));
    assert401(await withKey(null)('GET', '/organization'));
  });

  test('a request without a key is 401 before its body is read', async () => {
    assert401(await withKey(null)('POST', '/tasks', { url: 'http://127.0.0.1:9/', body: 'a'.repeat(2_000_000) }));
    assert401(await withKey(null)('POST', '/tasks', '{not json'));
  });

  test('the public part alone is 401', async () => {
    assert401(await withKey(apiKey.split('.')[0]!)('GET', '/tasks'));
  });

  test('malformed keys and headers are 401', async () => {
    const [pk, sk] = apiKey.split('.') as [string, string];
    for (const header of [`Basic ${apiKey}`, 'Bearer', `Bearer ${pk}.${sk}x`, `Bearer ${pk}.sk_${'0'.repeat(40)}`, `Bearer ${sk}.${pk}`, apiKey, `Bearer ${apiKey} extra`]) {
      assert401(await withKey(null)('GET', '/tasks', undefined, { Authorization: header }));
    }
    const unknown = `pk_${'a'.repeat(24)}.sk_${'b'.repeat(40)}`;
    assert401(await withKey(unknown)('GET', '/tasks'));
    assert.equal((await api('GET', '/tasks')).status, 200);
  });

  test('a revoked key is 401 while other keys of the organization keep working', async () => {
    const org = await svc.createOrg('pro');
    const before = await org.api('GET', '/tasks');
    assert.equal(before.status, 200);
    const conn = await connectNats(svc.natsUrl, 'test revoke');
    try {
      await revokeApiKey({ store: createEventStore(conn), clock: createClock(1) }, org.apiKey.split('.')[0]!);
    } finally {
      await conn.close();
    }
    await eventually(async () => (await org.api('GET', '/tasks')).status === 401, 30_000);
    assert401(await org.api('GET', '/organization'));
    assert.equal((await api('GET', '/tasks')).status, 200);
  });

  test('GET /organization has the contract shape with both flags defaulting to true', async () => {
    const res = await api('GET', '/organization');
    assert.equal(res.status, 200);
    const o = res.body.data;
    for (const f of ORG_FIELDS) assert.ok(f in o, `missing ${f}`);
    assert.equal(o.id, orgId);
    assert.match(o.id, /^org_/);
    assert.equal(o.plan, 'pro');
    assert.match(o.webhook_secret, /^whsec_/);
    assert.equal(o.notification_email, null);
    assert.equal(o.notification_webhook_url, null);
    assert.equal(o.notify_on_failure, true);
    assert.equal(o.notify_on_recovery, true);
    assert.ok(!Number.isNaN(Date.parse(o.created_at)));
    assert.ok(!Number.isNaN(Date.parse(o.updated_at)));
  });

  test('PUT /organization changes the four settings only and rejects unknown fields', async () => {
    const res = await api('PUT', '/organization', {
      notification_email: 'ops@example.com',
      notification_webhook_url: 'https://hooks.example.com/x',
      notify_on_failure: false,
      notify_on_recovery: false,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.notification_email, 'ops@example.com');
    assert.equal(res.body.data.notification_webhook_url, 'https://hooks.example.com/x');
    assert.equal(res.body.data.notify_on_failure, false);
    assert.equal(res.body.data.notify_on_recovery, false);
    const got = (await api('GET', '/organization')).body.data;
    assert.equal(got.notification_email, 'ops@example.com');
    assert.equal(got.notify_on_recovery, false);

    // Only what is sent changes.
    const partial = (await api('PUT', '/organization', { notify_on_failure: true })).body.data;
    assert.equal(partial.notify_on_failure, true);
    assert.equal(partial.notify_on_recovery, false);
    assert.equal(partial.notification_email, 'ops@example.com');
    const cleared = (await api('PUT', '/organization', { notification_email: null })).body.data;
    assert.equal(cleared.notification_email, null);
    assert.equal(cleared.notification_webhook_url, 'https://hooks.example.com/x');

    for (const [body, field] of [
      [{ plan: 'free' }, 'plan'],
      [{ webhook_secret: 'whsec_mine' }, 'webhook_secret'],
      [{ notify_on_failur: true }, 'notify_on_failur'],
      [{ notify_on_failure: 'yes' }, 'notify_on_failure'],
      [{ notification_email: 'not an email' }, 'notification_email'],
      [{ notification_webhook_url: 'ftp://x' }, 'notification_webhook_url'],
    ] as const) {
      const bad = await api('PUT', '/organization', body);
      assert.equal(bad.status, 422, JSON.stringify(body));
      assert.equal(bad.body.error.field, field);
    }
    const after = (await api('GET', '/organization')).body.data;
    assert.equal(after.plan, 'pro');
    assert.equal(after.webhook_secret, got.webhook_secret);
    assert.equal((await api('PUT', '/organization', [1])).status, 400);
  });

  test('rotating the webhook secret signs later task requests with the new one', async () => {
    const old = (await api('GET', '/organization')).body.data.webhook_secret;
    const res = await api('POST', '/organization/webhook-secret/rotate');
    assert.equal(res.status, 200);
    const fresh = res.body.data.webhook_secret;
    assert.match(fresh, /^whsec_/);
    assert.notEqual(fresh, old);
    assert.equal((await api('GET', '/organization')).body.data.webhook_secret, fresh);

    const target = await startTarget();
    try {
      const task = (await api('POST', '/tasks', { url: `${target.url}/signed`, body: 'payload' })).body.data;
      const got = await eventually(async () => target.received[0]);
      const check = (secret: string) => signedWith(got, secret, task.last_execution_id);
      assert.equal(got.headers['x-jetcron-execution-id'], task.last_execution_id);
      assert.ok(check(fresh), 'signed with the new secret');
      assert.ok(!check(old), 'not with the old one');
    } finally {
      await target.close();
    }
  });

  test('the rate limit allows a burst of 2× the rate, then 429 with Retry-After', async () => {
    const free = await svc.createOrg('free');
    const t0 = performance.now();
    const burst = await Promise.all(Array.from({ length: 10 }, () => free.api('GET', '/tasks')));
    const burstElapsed = (performance.now() - t0) / 1000;
    assert.deepEqual(burst.map((r) => r.status), Array(10).fill(200));
    // The bucket refills at 5/s while the requests are in flight, so a slow machine may
    // leave a few more; never more than the refill allows.
    const remaining = burst.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort((a, b) => a - b);
    assert.ok(remaining[0]! <= Math.ceil(burstElapsed * 5) + 1, `remaining ${remaining} after ${burstElapsed} s`);
    for (const r of burst) assert.equal(r.headers.get('ratelimit-limit'), '10');
    // Likewise what follows is allowed at most at the refill rate; batches go on until one
    // is limited (however slowly this machine answers, 20 at once outrun 5/s).
    const more: Awaited<ReturnType<typeof free.api>>[] = [];
    while (!more.some((r) => r.status === 429) && more.length < 400) more.push(...await Promise.all(Array.from({ length: 20 }, () => free.api('GET', '/tasks'))));
    const elapsed = (performance.now() - t0) / 1000;
    const allowed = more.filter((r) => r.status === 200).length;
    assert.ok(allowed <= Math.ceil(elapsed * 5) + 1, `${allowed} more allowed in ${elapsed} s`);
    const limited = more.find((r) => r.status === 429)!;
    assert.ok(limited, 'some requests were limited');
    assert.equal(more.filter((r) => r.status !== 200 && r.status !== 429).length, 0);
    assert.equal(limited.body.error.field, null);
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
    assert.equal(limited.headers.get('ratelimit-limit'), '10');
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    assert.ok(Number(limited.headers.get('ratelimit-reset')) >= 1);
    // Another organization is not affected, and the bucket refills (5/s).
    assert.equal((await api('GET', '/tasks')).status, 200);
    await new Promise((r) => setTimeout(r, 450));
    assert.equal((await free.api('GET', '/tasks')).status, 200);
  });

  test('/healthz answers 200 {status: ok} without a key, naming each consumer this process runs', async () => {
    const res = await raw('/healthz');
    assert.equal(res.status, 200);
    const body = await res.json() as any;
    assert.equal(body.status, 'ok');
    assert.deepEqual(body.stores, { nats: 'ok', postgres: 'ok' });
    assert.equal(body.failures_recorded, 0);
    for (const consumer of ['projector', 'notifier', 'inbound-router', 'notifiers']) {
      assert.ok(body.consumers[consumer], `${consumer} in ${JSON.stringify(body.consumers)}`);
      assert.notEqual(body.consumers[consumer].state, 'stuck', consumer);
    }
    assert.equal(body.consumers.projector.lag, 0);
  });

  test('/metrics is Prometheus text with the request counter', async () => {
    await api('GET', '/tasks');
    const res = await raw('/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const text = await res.text();
    assert.match(text, /^# TYPE jetcron_http_requests_total counter$/m);
    assert.match(text, /^jetcron_http_requests_total\{[^}]*method="GET"[^}]*\} \d+$/m);
  });

  test('/api/v1/openapi.json is OpenAPI 3.1 built from the request schemas', async () => {
    const res = await raw('/api/v1/openapi.json');
    assert.equal(res.status, 200);
    const doc = await res.json();
    assert.match(doc.openapi, /^3\.1\./);
    const create = doc.components.schemas.CreateTask;
    assert.equal(create.additionalProperties, false);
    assert.deepEqual(create.required, ['url']);
    assert.equal(create.properties.timeout_ms.minimum, 1000);
    assert.equal(create.properties.timeout_ms.maximum, 300000);
    assert.deepEqual(create.properties.method.enum, ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
    assert.ok(doc.paths['/tasks'].post);
    assert.equal(doc.components.schemas.UpdateOrganization.additionalProperties, false);
    // Every resource's paths and request schemas are there.
    for (const path of ['/tasks/batch', '/schedules', '/schedules/{id}/trigger', '/monitors/{id}/pause', '/sync', '/endpoints', '/endpoints/{id}/events/{event_id}/replay']) assert.ok(doc.paths[path], path);
    assert.deepEqual(doc.components.schemas.CreateEndpoint.required, ['name']);
    assert.equal(doc.components.schemas.CreateEndpoint.properties.forward_urls.maxItems, 10);
    assert.ok(doc.components.schemas.CreateSchedule.required.includes('cron'));
  });

  test('unknown API paths are 404 with the error body', async () => {
    const res = await api('GET', '/nothing-here');
    assert.equal(res.status, 404);
    assert.deepEqual(Object.keys(res.body.error).sort(), ['field', 'message']);
  });
});
