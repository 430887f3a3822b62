import { agree, Nullable, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';

const apiKeySchema = Type.Object({
  public_id: Str('`pk_…`: the part before the dot of an API key'),
  org_id: Str(),
  secret_hash: Str('SHA-256 of the secret part; the secret itself is never stored'),
  created_at: Time(),
  revoked_at: Nullable(Time()),
});

export const API_KEY_EVENT_SCHEMAS = {
  ApiKeyCreated: Type.Object({ key: apiKeySchema }),
  ApiKeyRevoked: Type.Object({ key: apiKeySchema }),
};
agree<Disagreeing<typeof API_KEY_EVENT_SCHEMAS>>();
