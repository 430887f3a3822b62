import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { inboundEventRow, settled } from './support/inbound-events.ts';
import { startTarget } from './support/target.ts';

// Inbound requests signed by the vendors' own libraries (Stripe, GitHub's Octokit,
// Standard Webhooks) or, where a vendor ships none (Shopify, the generic hmac), by
// node:crypto as the vendor documents it.

const STRIPE_SECRET = 'whsec_stripe_endpoint_secret_0123456789';
const GITHUB_SECRET = 'github-webhook-secret';
const SHOPIFY_SECRET = 'shpss_shopify_app_secret';
const HMAC_SECRET = 'generic-secret';
const STANDARD_SECRET = `whsec_${Buffer.from('standard webhooks sender key 32b').toString('base64')}`;

type Sent = { status: number; body: { id: string; status: string } };

describe('inbound verification presets', () => {
  let svc: TestService;
  let api: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  before(async () => {
    svc = await startTestService();
    // Presets are on every plan: a Free organization.
    api = (await svc.createOrg('free')).api;
    target = await startTarget(() => ({ status: 200, body: 'ok' }));
  });
  after(async () => {
    await target.close();
    await svc.stop();
  });

  async function createEndpoint(name: string, verification: Record<string, unknown>) {
    const res = await api('POST', '/endpoints', { name, forward_urls: [`${target.url}/${name}`], retry_attempts: 0, verification });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data as { id: string; inbound_url: string; verification: Record<string, unknown> };
  }
  const send = async (url: string, body: string, headers: Record<string, string>): Promise<Sent> => {
    const res = await fetch(url, { method: 'POST', body, headers: { 'Content-Type': 'application/json', ...headers }, signal: AbortSignal.timeout(20_000) });
    return { status: res.status, body: (await res.json()) as Sent['body'] };
  };
  const eventRow = (endpointId: string, eventId: string, ready?: (row: any) => boolean) => inboundEventRow(api, endpointId, eventId, ready);
  const arrivals = (name: string) => target.received.filter((r) => r.path === `/${name}`).map((r) => r.body);

  /**
   * The signed request is accepted and forwarded with its headers; every bad one is
   * answered 403, stored as rejected with why, and planned no execution. A good
   * request sent after the bad ones is forwarded too: the endpoint's lane keeps
   * arrival order, so once it arrives nothing else can still be on its way.
   */
  async function acceptsAndRejects(opts: {
    name: string;
    verification: Record<string, unknown>;
    sign: (body: string) => Promise<Record<string, string>> | Record<string, string>;
    bad: Array<{ why: string; request: (body: string) => Promise<[string, Record<string, string>]> | [string, Record<string, string>]; reason: RegExp }>;
  }) {
    const ep = await createEndpoint(opts.name, opts.verification);
    assert.equal('secret' in ep.verification, false, 'the secret is write-only');
    const body = JSON.stringify({ id: `${opts.name}-1`, amount: 1999 });
    const signed = await opts.sign(body);
    const good = await send(ep.inbound_url, body, signed);
    assert.deepEqual([good.status, good.body.status], [200, 'received'], `${opts.name}: signed request`);

    const rejected: Array<{ sent: Sent; reason: RegExp; why: string }> = [];
    for (const bad of opts.bad) {
      const [b, headers] = await bad.request(body);
      const sent = await send(ep.inbound_url, b, headers);
      assert.deepEqual([sent.status, sent.body], [403, { id: sent.body.id, status: 'rejected' }], `${opts.name}: ${bad.why}`);
      rejected.push({ sent, reason: bad.reason, why: bad.why });
    }
    const last = JSON.stringify({ id: `${opts.name}-2` });
    const after = await send(ep.inbound_url, last, await opts.sign(last));
    assert.equal(after.status, 200);

    const goodRow = await eventRow(ep.id, good.body.id, settled);
    assert.deepEqual([goodRow.outcome, goodRow.execution_status, goodRow.error_message], ['forwarding', 'success', null]);
    for (const r of rejected) {
      const row = await eventRow(ep.id, r.sent.body.id, () => true);
      assert.deepEqual([row.outcome, row.execution_status, row.executions], ['rejected', 'rejected', []], `${opts.name}: ${r.why}`);
      assert.match(row.error_message, new RegExp(`^verification \\(${opts.verification.type}\\) failed: `));
      assert.match(row.error_message, r.reason, `${opts.name}: ${r.why}`);
    }
    await eventRow(ep.id, after.body.id, settled);
    assert.deepEqual(arrivals(opts.name), [body, last], `${opts.name}: only the verified requests are forwarded`);
    // The forward keeps the sender's signature headers.
    const forwarded = target.received.find((r) => r.path === `/${opts.name}`)!;
    for (const [name, value] of Object.entries(signed)) assert.equal(forwarded.headers[name.toLowerCase()], value);
    return ep;
  }
  // The Free plan holds 3 endpoints: each test removes its own.
  const remove = async (ep: { id: string }) => assert.equal((await api('DELETE', `/endpoints/${ep.id}`)).status, 204);

  const oneByteChanged = (body: string) => body.replace('1999', '1998');

  test('stripe: Stripe-Signature from stripe.webhooks.generateTestHeaderString', async () => {
    const header = (payload: string, secret = STRIPE_SECRET, timestamp?: number) =>
      ({ 'Stripe-Signature': Stripe.webhooks.generateTestHeaderString({ payload, secret, ...(timestamp ? { timestamp } : {}) }) });
    await remove(await acceptsAndRejects({
      name: 'stripe',
      verification: { type: 'stripe', secret: STRIPE_SECRET },
      sign: (body) => header(body),
      bad: [
        { why: 'wrong secret', request: (b) => [b, header(b, 'whsec_someone_else')], reason: /no v1 signature/ },
        { why: 'stale timestamp', request: (b) => [b, header(b, STRIPE_SECRET, Math.floor(Date.now() / 1000) - 600)], reason: /old \(more than 5 minutes\)/ },
        { why: 'missing header', request: (b) => [b, {}], reason: /no Stripe-Signature header/ },
        { why: 'body changed by one byte', request: (b) => [oneByteChanged(b), header(b)], reason: /no v1 signature/ },
      ],
    }));
  });

  test('github: X-Hub-Signature-256 from @octokit/webhooks-methods sign', async () => {
    const header = async (payload: string, secret = GITHUB_SECRET) => ({ 'X-Hub-Signature-256': await githubSign(secret, payload), 'X-GitHub-Event': 'push' });
    await remove(await acceptsAndRejects({
      name: 'github',
      verification: { type: 'github', secret: GITHUB_SECRET },
      sign: (body) => header(body),
      bad: [
        { why: 'wrong secret', request: async (b) => [b, await header(b, 'not-the-secret')], reason: /X-Hub-Signature-256 does not match/ },
        { why: 'missing header', request: (b) => [b, { 'X-GitHub-Event': 'push' }], reason: /no X-Hub-Signature-256 header/ },
        { why: 'body changed by one byte', request: async (b) => [oneByteChanged(b), await header(b)], reason: /does not match/ },
      ],
    }));
  });

  test('shopify: X-Shopify-Hmac-Sha256, base64 HMAC-SHA256 of the body', async () => {
    const header = (payload: string, secret = SHOPIFY_SECRET) =>
      ({ 'X-Shopify-Hmac-Sha256': createHmac('sha256', secret).update(payload, 'utf8').digest('base64'), 'X-Shopify-Topic': 'orders/create' });
    await remove(await acceptsAndRejects({
      name: 'shopify',
      verification: { type: 'shopify', secret: SHOPIFY_SECRET },
      sign: (body) => header(body),
      bad: [
        { why: 'wrong secret', request: (b) => [b, header(b, 'shpss_other')], reason: /does not match/ },
        { why: 'missing header', request: (b) => [b, {}], reason: /no X-Shopify-Hmac-Sha256 header/ },
        { why: 'body changed by one byte', request: (b) => [oneByteChanged(b), header(b)], reason: /does not match/ },
      ],
    }));
  });

  test('standard-webhooks: webhook-* from standardwebhooks sign, and the svix- names', async () => {
    const headers = (payload: string, secret = STANDARD_SECRET, at = new Date(), prefix = 'webhook') => {
      const id = `msg_${Math.random().toString(36).slice(2)}`;
      return { [`${prefix}-id`]: id, [`${prefix}-timestamp`]: String(Math.floor(at.getTime() / 1000)), [`${prefix}-signature`]: new Webhook(secret).sign(id, at, payload) };
    };
    const ep = await acceptsAndRejects({
      name: 'standard',
      verification: { type: 'standard-webhooks', secret: STANDARD_SECRET },
      sign: (body) => headers(body),
      bad: [
        { why: 'wrong secret', request: (b) => [b, headers(b, `whsec_${Buffer.from('another sender key').toString('base64')}`)], reason: /no v1 entry of webhook-signature matches/ },
        { why: 'stale timestamp', request: (b) => [b, headers(b, STANDARD_SECRET, new Date(Date.now() - 600_000))], reason: /more than 5 minutes/ },
        { why: 'missing header', request: (b) => [b, {}], reason: /no webhook-id, webhook-timestamp and webhook-signature headers/ },
        { why: 'body changed by one byte', request: (b) => [oneByteChanged(b), headers(b)], reason: /no v1 entry/ },
      ],
    });
    // Svix sends the same signature under svix- names.
    const body = '{"svix":true}';
    const svix = await send(ep.inbound_url, body, headers(body, STANDARD_SECRET, new Date(), 'svix'));
    assert.deepEqual([svix.status, svix.body.status], [200, 'received']);
    const forged = await send(ep.inbound_url, body, headers(body, `whsec_${Buffer.from('forger').toString('base64')}`, new Date(), 'svix'));
    assert.equal(forged.status, 403);
    const row = await eventRow(ep.id, forged.body.id, () => true);
    assert.match(row.error_message, /svix-signature/);
    await eventRow(ep.id, svix.body.id, settled);
    await remove(ep);
  });

  test('hmac: a generic HMAC in one header, with its algorithm, encoding and prefix', async () => {
    const header = (payload: string, secret = HMAC_SECRET) => ({ 'X-Signature': `sha1=${createHmac('sha1', secret).update(payload).digest('hex')}` });
    await remove(await acceptsAndRejects({
      name: 'generic',
      verification: { type: 'hmac', secret: HMAC_SECRET, header: 'X-Signature', algorithm: 'sha1', encoding: 'hex', prefix: 'sha1=' },
      sign: (body) => header(body),
      bad: [
        { why: 'wrong secret', request: (b) => [b, header(b, 'other')], reason: /X-Signature does not match/ },
        { why: 'missing prefix', request: (b) => [b, { 'X-Signature': header(b)['X-Signature'].slice(5) }], reason: /does not start with "sha1="/ },
        { why: 'missing header', request: (b) => [b, {}], reason: /no X-Signature header/ },
        { why: 'body changed by one byte', request: (b) => [oneByteChanged(b), header(b)], reason: /does not match/ },
      ],
    }));
  });

  test('the API never shows the secret; 422 names verification.<field>; PUT null removes it', async () => {
    const ep = await createEndpoint('api-shape', { type: 'github', secret: GITHUB_SECRET });
    const got = (await api('GET', `/endpoints/${ep.id}`)).body.data;
    assert.deepEqual(got.verification, { type: 'github' });
    assert.equal(JSON.stringify((await api('GET', '/endpoints')).body).includes(GITHUB_SECRET), false);

    for (const [verification, field] of [
      [{ type: 'paypal', secret: 'x' }, 'verification.type'],
      [{ type: 'stripe' }, 'verification.secret'],
      [{ secret: 'x' }, 'verification.type'],
      [{ type: 'hmac', secret: 'x', algorithm: 'sha256', encoding: 'hex' }, 'verification.header'],
      [{ type: 'hmac', secret: 'x', header: 'X-Sig', algorithm: 'md5', encoding: 'hex' }, 'verification.algorithm'],
      [{ type: 'github', secret: 'x', prefix: 'sha256=' }, 'verification.prefix'],
      [{ type: 'github', secret: 'x', colour: 'red' }, 'verification.colour'],
    ] as const) {
      const res = await api('POST', '/endpoints', { name: 'invalid', verification });
      assert.equal(res.status, 422, JSON.stringify(verification));
      assert.equal(res.body.error.field, field, JSON.stringify(res.body));
    }
    const noSecret = await api('PUT', `/endpoints/${ep.id}`, { verification: { type: 'shopify' } });
    assert.deepEqual([noSecret.status, noSecret.body.error.field], [422, 'verification.secret']);

    const unsigned = await send(ep.inbound_url, '{}', {});
    assert.equal(unsigned.status, 403);
    const cleared = await api('PUT', `/endpoints/${ep.id}`, { verification: null });
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.data.verification, null);
    const open = await send(ep.inbound_url, '{}', {});
    assert.equal(open.status, 200);
    await remove(ep);
  });

  test('the preset is checked before a script\'s verify: a request it refuses never reaches the script', async () => {
    const pro = (await svc.createOrg('pro')).api;
    // The save check runs the script under the 100 ms limit, which a busy machine's first call can miss: asked again then.
    const res = await eventually(async () => {
      const r = await pro('POST', '/endpoints', {
        name: 'preset-and-script', verification: { type: 'github', secret: GITHUB_SECRET },
        script: 'function verify(req)\n  log("script verify ran")\n  return req.headers["x-allow"] == "yes"\nend',
      });
      return r.status === 422 && /longer than/.test(r.body.error.message) ? null : r;
    }, 20_000);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const ep = res.body.data as { id: string; inbound_url: string };
    const body = '{"both":1}';
    const signed = { 'X-Hub-Signature-256': await githubSign(GITHUB_SECRET, body) };
    const unsigned = await send(ep.inbound_url, body, { 'X-Allow': 'yes' });
    const scriptSaysNo = await send(ep.inbound_url, body, signed);
    const both = await send(ep.inbound_url, body, { ...signed, 'X-Allow': 'yes' });
    assert.deepEqual([unsigned.status, scriptSaysNo.status, both.status], [403, 403, 200]);
    const row = (id: string) => eventually(async () => ((await pro('GET', `/endpoints/${ep.id}/events`)).body.data as any[]).find((r) => r.id === id));
    const first = await row(unsigned.body.id);
    assert.match(first.error_message, /^verification \(github\) failed/);
    assert.deepEqual(first.script_logs, []);
    const second = await row(scriptSaysNo.body.id);
    assert.match(second.error_message, /verify returned false/);
    assert.deepEqual(second.script_logs, ['script verify ran']);
  });
});
