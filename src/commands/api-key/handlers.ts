import { SUBJECTS } from '../../../streams/definitions.ts';
import { ApiError, notFound } from '../../lib/errors.ts';
import { isOrgId } from '../organization/handlers.ts';
import type { OrganizationEvent } from '../organization/types.ts';
import { commandMeta, retryConflicts, type CommandDeps } from '../execute.ts';
import { generateApiKey, hashSecret, PUBLIC_ID_PATTERN } from './secret.ts';
import type { ApiKey, ApiKeyEvent } from './types.ts';

export async function createApiKey(deps: CommandDeps, orgId: string): Promise<{ apiKey: string; key: ApiKey; seq: number }> {
  if (!isOrgId(orgId) || !(await deps.store.last<OrganizationEvent>(SUBJECTS.org(orgId)))) {
    throw notFound(`organization ${orgId} not found`);
  }
  const meta = commandMeta(deps.clock);
  const generated = generateApiKey();
  const key: ApiKey = {
    public_id: generated.publicId,
    org_id: orgId,
    secret_hash: hashSecret(generated.secret),
    created_at: meta.now,
    revoked_at: null,
  };
  const event: ApiKeyEvent = { type: 'ApiKeyCreated', id: meta.eventId, at: meta.now, org_id: orgId, data: { key } };
  const seq = await deps.store.append(SUBJECTS.apiKey(key.public_id), event, 0);
  return { apiKey: generated.full, key, seq };
}

export async function revokeApiKey(deps: CommandDeps, publicId: string): Promise<{ key: ApiKey; seq: number }> {
  if (!PUBLIC_ID_PATTERN.test(publicId)) throw notFound(`api key ${publicId} not found`);
  const subject = SUBJECTS.apiKey(publicId);
  // Two revokes at once: the one that conflicts reads the revocation and answers 409.
  return retryConflicts(deps, subject, async () => {
    const last = await deps.store.last<ApiKeyEvent>(subject);
    if (!last) throw notFound(`api key ${publicId} not found`);
    if (last.event.data.key.revoked_at) throw new ApiError(409, `api key ${publicId} is already revoked`);
    const meta = commandMeta(deps.clock);
    const key = { ...last.event.data.key, revoked_at: meta.now };
    const event: ApiKeyEvent = { type: 'ApiKeyRevoked', id: meta.eventId, at: meta.now, org_id: key.org_id, data: { key } };
    const seq = await deps.store.append(subject, event, last.seq);
    return { key, seq };
  });
}
