import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { inboundEventRow, settled } from './support/inbound-events.ts';
import { signedWith, startTarget, type ReceivedRequest } from './support/target.ts';

// Every request jetcron sends is checked with the official verifiers, as a receiver
// would: `new Webhook(webhook_secret).verify(rawBody, headers)` (standardwebhooks and
// svix from npm). 1/100 time: a task's first retry (2 min) waits 1.2 s, so its
// timestamp is a later second than the first attempt's.
const SCALE = 0.01;

const headersOf = (r: ReceivedRequest) => r.headers as Record<string, string>;

/** The request verifies with both official libraries under `secret`; returns its webhook-id. */
function verifies(r: ReceivedRequest, secret: string): string {
  new Webhook(secret).verify(r.body, headersOf(r), { jsonParse: false });
  // Svix's verifier also parses the body as JSON.
  if (r.headers['content-type'] === 'application/json') new SvixWebhook(secret).verify(r.body, headersOf(r));
  assert.equal(r.headers['webhook-timestamp'], r.headers['x-jetcron-timestamp']);
  return String(r.headers['webhook-id']);
}

describe('Standard Webhooks on every request jetcron sends', () => {
  let svc: TestService;
  let api: Api;
  let secret: string;
  let target: Awaited<ReturnType<typeof startTarget>>;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg()).api;
    secret = (await api('GET', '/organization')).body.data.webhook_secret;
    // /fail always fails, /retried fails its first attempt only.
    target = await startTarget((r) => (r.path === '/fail' || (r.path === '/retried' && at('/retried').length === 1) ? { status: 503 } : { status: 200 }));
  });
  after(async () => {
    await target.close();
    await svc.stop();
  });
  const at = (path: string) => target.received.filter((r) => r.path === path);
  const arrived = (path: string, n = 1) => eventually(async () => (at(path).length >= n ? at(path) : null), 20_000);

  test('new organizations get whsec_ + base64 of 32 bytes, and no previous secret', async () => {
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal((await api('GET', '/organization')).body.data.previous_webhook_secret_expires_at, null);
  });

  test('an attempt and its retry: same webhook-id (the execution id), a new timestamp; the callback: <execution id>-callback', async () => {
    const task = (await api('POST', '/tasks', { url: `${target.url}/retried`, body: { n: 1 }, retry_attempts: 1, callback_url: `${target.url}/callback` })).body.data;
    const [first, second] = await arrived('/retried', 2);
    const exe = task.last_execution_id;
    assert.equal(verifies(first!, secret), exe);
    assert.equal(verifies(second!, secret), exe);
    assert.ok(Number(second!.headers['webhook-timestamp']) > Number(first!.headers['webhook-timestamp']), 'the retry is signed at its own time');
    assert.notEqual(second!.headers['webhook-signature'], first!.headers['webhook-signature']);
    const [callback] = await arrived('/callback');
    assert.equal(verifies(callback!, secret), `${exe}-callback`);
    assert.equal(callback!.headers['x-jetcron-execution-id'], exe);
    assert.equal(JSON.parse(callback!.body).execution_id, exe);
    // A body that is not JSON verifies the same (the signature is over the raw bytes).
    const text = (await api('POST', '/tasks', { url: `${target.url}/text`, body: 'plain text ✓' })).body.data;
    const [plain] = await arrived('/text');
    assert.equal(verifies(plain!, secret), text.last_execution_id);
  });

  test('on_failure_url and the organization webhook: webhook-id is the notification id, also X-Jetcron-Notification-Id', async () => {
    assert.equal((await api('PUT', '/organization', { notification_webhook_url: `${target.url}/org-hook` })).status, 200);
    const task = (await api('POST', '/tasks', { url: `${target.url}/fail`, retry_attempts: 0, on_failure_url: `${target.url}/on-failure` })).body.data;
    const [own] = await arrived('/on-failure');
    const [org] = await arrived('/org-hook');
    for (const r of [own!, org!]) {
      assert.equal(verifies(r, secret), r.headers['x-jetcron-notification-id']);
      assert.match(String(r.headers['webhook-id']), /^ntf_/);
      assert.equal(JSON.parse(r.body).event, 'task.failed');
      assert.equal(r.headers['x-jetcron-execution-id'], task.last_execution_id);
    }
    assert.equal(own!.headers['webhook-id'], org!.headers['webhook-id']);
    assert.equal((await api('PUT', '/organization', { notification_webhook_url: null })).status, 200);
  });

  test('a forward is signed with the execution id; a forward of a Standard Webhooks sender\'s request keeps the sender\'s headers and adds none', async () => {
    const ep = (await api('POST', '/endpoints', { name: 'forwards', forward_urls: [`${target.url}/forwarded`], retry_attempts: 0 })).body.data;
    const plain = await fetch(ep.inbound_url, { method: 'POST', body: '{"plain":true}', headers: { 'Content-Type': 'application/json' } });
    assert.equal(plain.status, 200);
    const plainId = ((await plain.json()) as { id: string }).id;
    const row = await inboundEventRow(api, ep.id, plainId, settled);
    const [forward] = await arrived('/forwarded');
    assert.equal(verifies(forward!, secret), row.execution_id);

    // Upstream: a sender with its own Standard Webhooks secret.
    const upstream = `whsec_${Buffer.from('an upstream sender of webhooks!!').toString('base64')}`;
    const body = '{"from":"upstream"}';
    const now = new Date();
    const sent = { 'webhook-id': 'msg_upstream_1', 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': new Webhook(upstream).sign('msg_upstream_1', now, body) };
    const relayed = await fetch(ep.inbound_url, { method: 'POST', body, headers: { 'Content-Type': 'application/json', ...sent } });
    assert.equal(relayed.status, 200);
    const [, kept] = await arrived('/forwarded', 2);
    for (const [name, value] of Object.entries(sent)) assert.equal(kept!.headers[name], value, name);
    assert.deepEqual(new Webhook(upstream).verify(kept!.body, headersOf(kept!)), { from: 'upstream' });
    assert.throws(() => new Webhook(secret).verify(kept!.body, headersOf(kept!)));
    // jetcron's own signature is still there, in its X-Jetcron-* headers.
    assert.ok(signedWith(kept!, secret, String(kept!.headers['x-jetcron-execution-id'])));
  });

  test('task headers cannot set webhook-* (jetcron signs with them)', async () => {
    const res = await api('POST', '/tasks', { url: `${target.url}/x`, headers: { 'Webhook-Id': 'mine' } });
    assert.deepEqual([res.status, res.body.error.field], [422, 'headers.Webhook-Id']);
  });

  test('rotation: for 24 hours both secrets sign (the new one first), X-Jetcron-Signature uses the new one at once', async () => {
    const old = secret;
    const t0 = Date.now();
    const rotated = await api('POST', '/organization/webhook-secret/rotate');
    assert.equal(rotated.status, 200);
    const fresh = rotated.body.data.webhook_secret as string;
    assert.notEqual(fresh, old);
    const org = (await api('GET', '/organization')).body.data;
    assert.equal(org.webhook_secret, fresh);
    const expires = Date.parse(org.previous_webhook_secret_expires_at);
    assert.ok(expires >= t0 + 24 * 3_600_000 && expires <= Date.now() + 24 * 3_600_000, org.previous_webhook_secret_expires_at);
    assert.equal(rotated.body.data.previous_webhook_secret_expires_at, org.previous_webhook_secret_expires_at);

    const task = (await api('POST', '/tasks', { url: `${target.url}/rotated`, body: { after: 'rotation' } })).body.data;
    const [r] = await arrived('/rotated');
    assert.equal(verifies(r!, fresh), task.last_execution_id);
    assert.equal(verifies(r!, old), task.last_execution_id);
    const entries = String(r!.headers['webhook-signature']).split(' ');
    assert.equal(entries.length, 2);
    assert.deepEqual(new Webhook(fresh).verify(r!.body, { ...headersOf(r!), 'webhook-signature': entries[0]! }), { after: 'rotation' });
    assert.ok(signedWith(r!, fresh, task.last_execution_id));
    assert.equal(signedWith(r!, old, task.last_execution_id), false);
    secret = fresh;
  });
});
