import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { presetVerifier } from '../src/inbound/verification.ts';

// The presets' edge cases, with the vendors' own signers; the e2e test covers them through the service.
const body = Buffer.from('{"id":"evt_1","amount":1999}');
const pairs = (h: Record<string, string>) => Object.entries(h);
const now = Date.now();

test('stripe: any v1 entry may match (Stripe sends one per active secret); a timestamp 5 minutes ahead is refused too', () => {
  const verify = presetVerifier({ type: 'stripe' }, 'whsec_new');
  const ours = Stripe.webhooks.generateTestHeaderString({ payload: body.toString(), secret: 'whsec_new' });
  const theirs = Stripe.webhooks.generateTestHeaderString({ payload: body.toString(), secret: 'whsec_old' });
  const v1 = (h: string) => h.split(',').find((x) => x.startsWith('v1='))!;
  const both = `${theirs},${v1(ours)}`;
  assert.deepEqual(verify(pairs({ 'stripe-signature': both }), body, now), { ok: true });
  assert.equal(verify(pairs({ 'Stripe-Signature': theirs }), body, now).ok, false);
  const ahead = Stripe.webhooks.generateTestHeaderString({ payload: body.toString(), secret: 'whsec_new', timestamp: Math.floor(now / 1000) + 301 });
  const verdict = verify(pairs({ 'Stripe-Signature': ahead }), body, now);
  assert.equal(verdict.ok, false);
  assert.match((verdict as { reason: string }).reason, /in the future/);
  assert.match((verify(pairs({ 'Stripe-Signature': 't=abc,v1=00' }), body, now) as { reason: string }).reason, /not Unix seconds/);
});

test('standard-webhooks: a sender mid-rotation (two entries) verifies with either secret; v1a and other versions are ignored', () => {
  const [a, b] = [`whsec_${Buffer.from('first secret, 32 bytes long.....').toString('base64')}`, `whsec_${Buffer.from('second secret').toString('base64')}`];
  const at = new Date(now);
  const id = 'msg_1';
  const signature = `v1a,AAAA ${new Webhook(b).sign(id, at, body.toString())} ${new Webhook(a).sign(id, at, body.toString())}`;
  const headers = pairs({ 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now / 1000)), 'webhook-signature': signature });
  assert.deepEqual(presetVerifier({ type: 'standard-webhooks' }, a)(headers, body, now), { ok: true });
  assert.deepEqual(presetVerifier({ type: 'standard-webhooks' }, b)(headers, body, now), { ok: true });
  assert.equal(presetVerifier({ type: 'standard-webhooks' }, 'whsec_c29tZW9uZSBlbHNl')(headers, body, now).ok, false);
});

test('github and hmac: hex in either case, base64, with and without a prefix', async () => {
  const github = presetVerifier({ type: 'github' }, 's3cret');
  const signed = await githubSign('s3cret', body.toString());
  assert.deepEqual(github(pairs({ 'X-Hub-Signature-256': signed.toUpperCase().replace('SHA256=', 'sha256=') }), body, now), { ok: true });
  assert.equal(github(pairs({ 'X-Hub-Signature': signed }), body, now).ok, false, 'the SHA-1 header is not the one checked');
  const b64 = presetVerifier({ type: 'hmac', header: 'X-Sig', algorithm: 'sha256', encoding: 'base64' }, 'k');
  assert.deepEqual(b64(pairs({ 'x-sig': createHmac('sha256', 'k').update(body).digest('base64') }), body, now), { ok: true });
  assert.equal(b64(pairs({ 'x-sig': createHmac('sha1', 'k').update(body).digest('base64') }), body, now).ok, false);
});
