import type { Envelope } from '../../events/envelope.ts';

export interface ApiKey {
  public_id: string;
  org_id: string;
  secret_hash: string;
  created_at: string;
  revoked_at: string | null;
}

export type ApiKeyEvent =
  | Envelope<'ApiKeyCreated', { key: ApiKey }>
  | Envelope<'ApiKeyRevoked', { key: ApiKey }>;
