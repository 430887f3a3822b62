import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * Standard Webhooks v1 (https://www.standardwebhooks.com/), the part that both signs
 * jetcron's requests and checks a sender's: the key is the base64-decoded part of a
 * `whsec_` secret, the signature the base64 HMAC-SHA256 of `"{id}.{timestamp}.{body}"`.
 */

// Decoded once per secret: an organization signs with one or two, an endpoint checks with one.
// Kept as a KeyObject: an HMAC keyed with a Buffer costs about six times more to set up
// (measured on Node 24: 8.2 µs against 1.3 µs), once per request signed or checked.
const keys = new Map<string, KeyObject>();

export function standardWebhooksKey(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= 10_000) keys.clear();
    keys.set(secret, (key = createSecretKey(Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64'))));
  }
  return key;
}

/** The base64 signature (what follows `v1,`); `timestamp` as it is written in the header. */
export function standardWebhooksDigest(key: KeyObject, webhookId: string, timestamp: string | number, body: string | Buffer): string {
  return createHmac('sha256', key).update(`${webhookId}.${timestamp}.`).update(body).digest('base64');
}
