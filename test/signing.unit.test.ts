import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { signatureFor, signedHeaders, verifySignature } from '../src/dispatchers/signing.ts';

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
  const h = signedHeaders({ secret, taskId: 'task_1', executionId: 'exec_1', body: 'b', nowMs: 1_700_000_000_999 });
  assert.deepEqual(h, {
    'X-Jetcron-Task-Id': 'task_1',
    'X-Jetcron-Execution-Id': 'exec_1',
    'X-Jetcron-Timestamp': '1700000000',
    'X-Jetcron-Signature': signatureFor(secret, 1700000000, 'exec_1', 'b'),
  });
});

test('signedHeaders omits the task id when none is given', () => {
  const h = signedHeaders({ secret, executionId: 'ntf_1', body: '', nowMs: 0 });
  assert.equal('X-Jetcron-Task-Id' in h, false);
  assert.equal(h['X-Jetcron-Timestamp'], '0');
});

test('verifySignature accepts a fresh valid signature', () => {
  const nowMs = 1_700_000_000_000;
  const h = signedHeaders({ secret, executionId: 'e1', body: 'payload', nowMs });
  const base = { secret, executionId: 'e1', body: 'payload', signature: h['X-Jetcron-Signature'], timestamp: h['X-Jetcron-Timestamp'] };
  assert.equal(verifySignature({ ...base, nowMs }), true);
  assert.equal(verifySignature({ ...base, nowMs: nowMs + 300_000 }), true);
  assert.equal(verifySignature({ ...base, nowMs: nowMs + 301_000 }), false, 'too old');
  assert.equal(verifySignature({ ...base, nowMs: nowMs - 301_000 }), false, 'too far in the future');
});

test('verifySignature rejects tampering and malformed input', () => {
  const nowMs = 1_700_000_000_000;
  const h = signedHeaders({ secret, executionId: 'e1', body: 'payload', nowMs });
  const base = { secret, executionId: 'e1', body: 'payload', signature: h['X-Jetcron-Signature'], timestamp: h['X-Jetcron-Timestamp'], nowMs };
  assert.equal(verifySignature({ ...base, body: 'payload!' }), false);
  assert.equal(verifySignature({ ...base, executionId: 'e2' }), false);
  assert.equal(verifySignature({ ...base, secret: 'other' }), false);
  assert.equal(verifySignature({ ...base, signature: 'sha256=00' }), false);
  assert.equal(verifySignature({ ...base, signature: undefined }), false);
  assert.equal(verifySignature({ ...base, timestamp: '17e8' }), false);
  assert.equal(verifySignature({ ...base, timestamp: Number(h['X-Jetcron-Timestamp']) }), true);
});
