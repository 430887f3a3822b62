import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createSecretBox, decodeKey, keyId, openSecretBox, SecretBoxError } from '../src/nats/secret-box.ts';
import { type SealedSecrets } from '../src/lib/sealed-secrets.ts';
import type { Nats } from '../src/nats/connection.ts';

// With a key given, openSecretBox must not touch NATS: any use of this throws.
const noNats = new Proxy({}, { get: (_t, p) => { throw new Error(`NATS used (${String(p)})`); } }) as Nats;

const secrets = { STRIPE_KEY: 'whsec_abc', 'x-token': 'välue ✓', empty: '' };

function flip(b64: string, at = 0): string {
  const buf = Buffer.from(b64, 'base64');
  buf[at] = buf[at]! ^ 0x01;
  return buf.toString('base64');
}

test('seal then open gives the map back; the sealed form is JSON-safe and holds no plain text', () => {
  const box = createSecretBox(randomBytes(32));
  const sealed = box.seal(secrets)!;
  assert.equal(sealed.v, 1);
  assert.equal(sealed.kid, box.kid);
  assert.match(sealed.kid, /^[0-9a-f]{8}$/);
  assert.equal(Buffer.from(sealed.iv, 'base64').length, 12);
  assert.equal(Buffer.from(sealed.tag, 'base64').length, 16);
  const json = JSON.stringify(sealed);
  for (const text of ['whsec_abc', 'STRIPE_KEY', 'x-token']) assert.equal(json.includes(text), false);
  assert.deepEqual(box.open(JSON.parse(json) as SealedSecrets), secrets);
});

test('an empty map seals to null and null opens to {}', () => {
  const box = createSecretBox(randomBytes(32));
  assert.equal(box.seal({}), null);
  assert.deepEqual(box.open(null), {});
  assert.deepEqual(box.open(undefined), {});
});

test('every seal uses a fresh IV', () => {
  const box = createSecretBox(randomBytes(32));
  const a = box.seal(secrets)!;
  const b = box.seal(secrets)!;
  assert.notEqual(a.iv, b.iv);
  assert.notEqual(a.data, b.data);
  assert.deepEqual(box.open(a), box.open(b));
});

test('a flipped byte in data, tag or iv is detected', () => {
  const box = createSecretBox(randomBytes(32));
  const sealed = box.seal(secrets)!;
  const tampered: SealedSecrets[] = [
    { ...sealed, data: flip(sealed.data) },
    { ...sealed, data: flip(sealed.data, 5) },
    { ...sealed, tag: flip(sealed.tag) },
    { ...sealed, iv: flip(sealed.iv) },
  ];
  for (const t of tampered) {
    assert.throws(() => box.open(t), (err: Error) => err instanceof SecretBoxError && /altered or are corrupt/.test(err.message));
  }
  assert.throws(() => box.open({ ...sealed, iv: 'AAAA' }), /malformed/);
  assert.throws(() => box.open({ ...sealed, v: 2 } as unknown as SealedSecrets), /unknown version/);
});

test('opening with another key says so, naming the kid', () => {
  const a = createSecretBox(randomBytes(32));
  const b = createSecretBox(randomBytes(32));
  const sealed = a.seal(secrets)!;
  assert.throws(
    () => b.open(sealed),
    (err: Error) => err instanceof SecretBoxError && err.message.includes(`secrets were sealed with another key (kid ${a.kid}`) && err.message.includes(b.kid),
  );
  // Relabelling the kid does not get past GCM either.
  assert.throws(() => b.open({ ...sealed, kid: b.kid }), /altered or are corrupt/);
});

test('kid is the first 8 hex characters of SHA-256 of the key', () => {
  const key = randomBytes(32);
  assert.equal(createSecretBox(key).kid, createHash('sha256').update(key).digest('hex').slice(0, 8));
  assert.equal(keyId(key), createSecretBox(key).kid);
  assert.throws(() => createSecretBox(randomBytes(16)), /32 bytes/);
});

test('JETCRON_SECRETS_KEY as hex and as base64 both give that key, without NATS and without warnings', async () => {
  const key = randomBytes(32);
  const logs: string[] = [];
  const log = (m: string) => void logs.push(m);
  const forms = [key.toString('hex'), key.toString('hex').toUpperCase(), key.toString('base64'), key.toString('base64url'), ` ${key.toString('base64')}\n`];
  const reference = createSecretBox(key);
  const sealed = reference.seal(secrets)!;
  for (const envKey of forms) {
    const box = await openSecretBox({ nats: noNats, envKey, log });
    assert.equal(box.kid, reference.kid, envKey);
    assert.deepEqual(box.open(sealed), secrets);
  }
  assert.deepEqual(logs, []);
  assert.deepEqual(decodeKey(key.toString('base64').replace(/=$/, '')), key);
  assert.equal(decodeKey(randomBytes(16).toString('hex')), null);
  assert.equal(decodeKey(randomBytes(24).toString('base64')), null);
});

test('any other JETCRON_SECRETS_KEY is hashed as a passphrase, with a warning', async () => {
  const logs: string[] = [];
  const box = await openSecretBox({ nats: noNats, envKey: 'correct horse battery staple', log: (m) => void logs.push(m) });
  assert.equal(box.kid, keyId(createHash('sha256').update('correct horse battery staple').digest()));
  assert.equal(logs.length, 1);
  assert.match(logs[0]!, /passphrase/);
  const again = await openSecretBox({ nats: noNats, envKey: 'correct horse battery staple', log: () => {} });
  assert.deepEqual(again.open(box.seal(secrets)), secrets);
});
