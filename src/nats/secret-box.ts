import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';
import type { SealedSecrets } from '../lib/sealed-secrets.ts';
import { isTransient } from '../lib/transient.ts';


export interface SecretBox {
  /** The kid of this box's key (see `SealedSecrets.kid`). */
  readonly kid: string;
  /** Seals the whole map; an empty map gives `null`. */
  seal(plain: Record<string, string>): SealedSecrets | null;
  /** Opens what `seal` gave (`null`/`undefined` → `{}`); throws `SecretBoxError` on a wrong key or tampered data. */
  open(sealed: SealedSecrets | null | undefined): Record<string, string>;
}

export class SecretBoxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Where the shared key lives when JETCRON_SECRETS_KEY is not set. */
export const SECRETS_KEY_ENTRY = 'secrets-key';

export function keyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** The header fields are bound to the ciphertext too, so they cannot be swapped. */
function aad(kid: string): Buffer {
  return Buffer.from(`jetcron-secrets:v1:${kid}`, 'utf8');
}

export function createSecretBox(key: Uint8Array): SecretBox {
  if (key.length !== KEY_BYTES) throw new SecretBoxError(`a secrets key is ${KEY_BYTES} bytes, not ${key.length}`);
  const keyBuf = Buffer.from(key);
  const kid = keyId(keyBuf);
  return {
    kid,
    seal(plain) {
      const entries = Object.entries(plain);
      if (entries.length === 0) return null;
      for (const [name, value] of entries) {
        if (typeof value !== 'string') throw new SecretBoxError(`secret ${name}: the value must be a string`);
      }
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', keyBuf, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad(kid));
      const data = Buffer.concat([cipher.update(JSON.stringify(plain), 'utf8'), cipher.final()]);
      return { v: 1, kid, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
    },
    open(sealed) {
      if (sealed === null || sealed === undefined) return {};
      if (sealed.v !== 1) throw new SecretBoxError(`sealed secrets have an unknown version ${String(sealed.v)}`);
      if (sealed.kid !== kid) {
        throw new SecretBoxError(
          `secrets were sealed with another key (kid ${sealed.kid}, this key is ${kid}); set JETCRON_SECRETS_KEY to the key they were sealed with`,
        );
      }
      const iv = Buffer.from(sealed.iv, 'base64');
      const tag = Buffer.from(sealed.tag, 'base64');
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretBoxError('sealed secrets are malformed');
      let text: string;
      try {
        const decipher = createDecipheriv('aes-256-gcm', keyBuf, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(aad(sealed.kid));
        decipher.setAuthTag(tag);
        text = Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError('sealed secrets failed authentication: they were altered or are corrupt');
      }
      const parsed: unknown = JSON.parse(text);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string')) {
        throw new SecretBoxError('sealed secrets do not hold a map of strings');
      }
      return parsed as Record<string, string>;
    },
  };
}

/** 32 bytes from 64 hex characters or base64 (standard or URL-safe, padding optional); null otherwise. */
export function decodeKey(text: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  // Node's base64 decoder also takes the URL-safe alphabet.
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) return Buffer.from(text, 'base64');
  return null;
}

/**
 * The service's secret box. With `envKey` (JETCRON_SECRETS_KEY) NATS is not used;
 * without it the key is read from, or created once in, the KV bucket `config`.
 */
export async function openSecretBox(opts: { nats: Nats; envKey?: string | undefined; log: (m: string) => void }): Promise<SecretBox> {
  const envKey = opts.envKey?.trim();
  if (envKey) {
    const key = decodeKey(envKey);
    if (key) return createSecretBox(key);
    opts.log(
      'JETCRON_SECRETS_KEY is neither 64 hex characters nor base64 of 32 bytes: using the SHA-256 of it as the key (a passphrase); prefer a random key, e.g. `openssl rand -base64 32`',
    );
    return createSecretBox(createHash('sha256').update(envKey, 'utf8').digest());
  }

  // One candidate for every try: a create whose answer was lost is recognised as ours.
  const fresh = randomBytes(KEY_BYTES);
  const { key, created } = await untilAnswered(async () => sharedKey(await openConfigBucket(opts.nats), fresh));
  const box = createSecretBox(key);
  opts.log(
    `endpoint secrets: ${created ? 'generated a key and stored it' : 'using the key stored'} in NATS (KV ${KV_BUCKETS.config.name}/${SECRETS_KEY_ENTRY}, kid ${box.kid}); ` +
      'anyone who can read that bucket can decrypt the secrets. In production set JETCRON_SECRETS_KEY ' +
      '(to keep existing secrets readable, set it to the value stored in NATS)',
  );
  return box;
}

/** Tries of the bucket and key calls whose answer did not come: each is safe to repeat, and a busy server may answer late. */
const TRIES = 5;

async function untilAnswered<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= TRIES || !isTransient(err)) throw err;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}

async function openConfigBucket(nats: Nats): Promise<KV> {
  const kvm = new Kvm(nats.nc);
  // `create` binds to the bucket when it exists (applyStreams makes it) and makes it otherwise.
  try {
    return await kvm.create(KV_BUCKETS.config.name, { history: 1 });
  } catch (err) {
    // E.g. another process made it with other options (replicas) at the same moment.
    return await kvm.open(KV_BUCKETS.config.name).catch(() => Promise.reject(err));
  }
}

async function readKey(kv: KV): Promise<Buffer | null> {
  const entry = await kv.get(SECRETS_KEY_ENTRY);
  if (!entry || entry.operation !== 'PUT') return null;
  const key = decodeKey(entry.string().trim());
  if (!key) throw new SecretBoxError(`KV ${KV_BUCKETS.config.name}/${SECRETS_KEY_ENTRY} does not hold base64 of ${KEY_BYTES} bytes`);
  return key;
}

/** Reads the key or creates it; `create` is create-if-absent, so racing processes agree on the first one. */
async function sharedKey(kv: KV, fresh: Buffer): Promise<{ key: Buffer; created: boolean }> {
  const existing = await readKey(kv);
  if (existing) return { key: existing, created: existing.equals(fresh) };
  try {
    await kv.create(SECRETS_KEY_ENTRY, fresh.toString('base64'));
    return { key: fresh, created: true };
  } catch (err) {
    // Someone else created it first. A read served by a lagging replica may not
    // see it yet, so try a few times before giving up.
    for (let attempt = 0; attempt < 10; attempt++) {
      const key = await readKey(kv);
      if (key) return { key, created: false };
      await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
    }
    throw err;
  }
}
