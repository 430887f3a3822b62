/**
 * Endpoint secrets at rest. An endpoint's state lives in events on EVENTS (kept
 * forever), so its secret values travel there sealed: the whole name → value map
 * as JSON, encrypted with AES-256-GCM under one service-wide key, a fresh random
 * 12-byte IV per seal. Nothing but the sealed form is ever stored (Postgres only
 * lists the names).
 *
 * The key is `JETCRON_SECRETS_KEY` when set (64 hex characters or base64 of 32
 * bytes; any other text is taken as a passphrase and hashed with SHA-256).
 * Otherwise the processes share one generated key through the KV bucket `config`
 * (key `secrets-key`, base64 of 32 bytes): the first process creates it, the
 * others read it. Copying that value into JETCRON_SECRETS_KEY keeps every sealed
 * secret readable.
 *
 * An empty map seals to `null` (nothing to store) and `open(null)` is `{}`.
 */
export interface SealedSecrets {
  v: 1;
  /** First 8 hex characters of SHA-256 of the key: names the key without revealing it. */
  kid: string;
  /** base64 of the 12-byte IV. */
  iv: string;
  /** base64 of the 16-byte GCM tag. */
  tag: string;
  /** base64 of the ciphertext of the map's JSON. */
  data: string;
}

/** What seals and opens such maps (the service's `SecretBox`), as the command handlers see it. */
export interface Sealer {
  seal(plain: Record<string, string>): SealedSecrets | null;
  open(sealed: SealedSecrets | null | undefined): Record<string, string>;
}
