import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { hasStandardWebhookHeaders, signatureFor, signedHeaders, verifySignature } from '../src/dispatchers/signing.ts';
import { generateWebhookSecret } from '../src/commands/api-key/secret.ts';

const secret = 'whsec_test_123';

test('signatureFor matches an independently computed HMAC', () => {
  const expected = createHmac('sha256', secret).update('1700000000.exec_1.{"a":1}').digest('hex');
  assert.equal(signatureFor(secret, 1700000000, 'exec_1', '{"a":1}'), `sha256=${expected}`);
  assert.match(signatureFor(secret, 1, 'e', ''), /^sha256=[0-9a-f]{64}$/);
});

test('signatureFor signs the UTF-8 body and the whole secret', () => {
  const body = 'héllo ✓';
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(Buffer.from(`5.x.${body}`, 'utf8')).digest('hex');
  assert.equal(signatureFor(secret, 5, 'x', body), `sha256=${expected}`);
  assert.notEqual(signatureFor('whsec_test_12', 5, 'x', body), signatureFor(secret, 5, 'x', body));
});

test('signedHeaders carries task, execution, timestamp and signature', () => {
  const h = signedHeaders({ secrets: [secret], webhookId: null, taskId: 'task_1', executionId: 'exec_1', body: 'b', nowMs: 1_700_000_000_999 });
  assert.deepEqual(h, {
    'X-Jetcron-Task-Id': 'task_1',
    'X-Jetcron-Execution-Id': 'exec_1',
    'X-Jetcron-Timestamp': '1700000000',
    'X-Jetcron-Signature': signatureFor(secret, 1700000000, 'exec_1', 'b'),
  });
});

test('signedHeaders omits the task id when none is given', () => {
  const h = signedHeaders({ secrets: [secret], webhookId: null, executionId: 'ntf_1', body: '', nowMs: 0 });
  assert.equal('X-Jetcron-Task-Id' in h, false);
  assert.equal(h['X-Jetcron-Timestamp'], '0');
});

test('verifySignature accepts a fresh valid signature', () => {
  const nowMs = 1_700_000_000_000;
  const h = signedHeaders({ secrets: [secret], webhookId: null, executionId: 'e1', body: 'payload', nowMs });
  const base = { secret, executionId: 'e1', body: 'payload', signature: h['X-Jetcron-Signature'], timestamp: h['X-Jetcron-Timestamp'] };
  assert.equal(verifySignature({ ...base, nowMs }), true);
  assert.equal(verifySignature({ ...base, nowMs: nowMs + 300_000 }), true);
  assert.equal(verifySignature({ ...base, nowMs: nowMs + 301_000 }), false, 'too old');
  assert.equal(verifySignature({ ...base, nowMs: nowMs - 301_000 }), false, 'too far in the future');
});

test('verifySignature rejects tampering and malformed input', () => {
  const nowMs = 1_700_000_000_000;
  const h = signedHeaders({ secrets: [secret], webhookId: null, executionId: 'e1', body: 'payload', nowMs });
  const base = { secret, executionId: 'e1', body: 'payload', signature: h['X-Jetcron-Signature'], timestamp: h['X-Jetcron-Timestamp'], nowMs };
  assert.equal(verifySignature({ ...base, body: 'payload!' }), false);
  assert.equal(verifySignature({ ...base, executionId: 'e2' }), false);
  assert.equal(verifySignature({ ...base, secret: 'other' }), false);
  assert.equal(verifySignature({ ...base, signature: 'sha256=00' }), false);
  assert.equal(verifySignature({ ...base, signature: undefined }), false);
  assert.equal(verifySignature({ ...base, timestamp: '17e8' }), false);
  assert.equal(verifySignature({ ...base, timestamp: Number(h['X-Jetcron-Timestamp']) }), true);
});

// Standard Webhooks: checked with the official verifiers, never with our own code.
const fresh = generateWebhookSecret();
const legacy = 'whsec_abcdefghijklmnopqrstuvwxyz0123456789abcd';

test('new secrets are whsec_ + base64 of 32 bytes', () => {
  assert.match(fresh, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.equal(Buffer.from(fresh.slice(6), 'base64').length, 32);
  assert.notEqual(generateWebhookSecret(), fresh);
});

test('signedHeaders adds webhook-id, -timestamp and -signature that standardwebhooks and svix verify, new and legacy secrets alike', () => {
  for (const s of [fresh, legacy]) {
    const body = '{"a":"héllo"}';
    const h = signedHeaders({ secrets: [s], taskId: 'tsk_1', executionId: 'exe_1', webhookId: 'exe_1', body, nowMs: Date.now() });
    assert.equal(h['webhook-id'], 'exe_1');
    assert.equal(h['webhook-timestamp'], h['X-Jetcron-Timestamp']);
    assert.match(h['webhook-signature']!, /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(new Webhook(s).verify(body, h), { a: 'héllo' });
    assert.deepEqual(new SvixWebhook(s).verify(body, h), { a: 'héllo' });
    assert.throws(() => new Webhook(s).verify(`${body} `, h));
    assert.throws(() => new Webhook(fresh === s ? legacy : fresh).verify(body, h));
    // The X-Jetcron-* signature is unchanged beside it.
    assert.equal(h['X-Jetcron-Signature'], signatureFor(s, Number(h['X-Jetcron-Timestamp']), 'exe_1', body));
  }
});

test('two secrets (a rotation): two signatures, the first secret\'s first; either secret verifies; X-Jetcron-Signature uses the first', () => {
  const body = Buffer.from('{"n":1}');
  const h = signedHeaders({ secrets: [fresh, legacy], executionId: 'exe_2', webhookId: 'exe_2-callback', body, nowMs: Date.now() });
  const [first, second, ...rest] = h['webhook-signature']!.split(' ');
  assert.equal(rest.length, 0);
  assert.equal(first, signedHeaders({ secrets: [fresh], executionId: 'exe_2', webhookId: 'exe_2-callback', body, nowMs: Date.now() })['webhook-signature']);
  assert.ok(second);
  assert.deepEqual(new Webhook(fresh).verify(body, h), { n: 1 });
  assert.deepEqual(new Webhook(legacy).verify(body, h), { n: 1 });
  assert.deepEqual(new SvixWebhook(legacy).verify(body, h), { n: 1 });
  assert.equal(h['X-Jetcron-Signature'], signatureFor(fresh, Number(h['X-Jetcron-Timestamp']), 'exe_2', body));
});

test('no webhookId: no Standard Webhooks headers (a forward keeps its sender\'s)', () => {
  const h = signedHeaders({ secrets: [fresh], executionId: 'exe_3', webhookId: null, body: '', nowMs: 0 });
  assert.equal(hasStandardWebhookHeaders(h), false);
  assert.equal(hasStandardWebhookHeaders({ 'Webhook-Signature': 'v1,x' }), true);
  assert.equal(hasStandardWebhookHeaders({ 'svix-signature': 'v1,x' }), false);
});
