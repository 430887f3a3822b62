import { SUBJECTS } from '../../../streams/subjects.ts';
import { notFound } from '../../lib/errors.ts';
import { isOrgId } from '../organization/handlers.ts';
import type { OrganizationEvent } from '../organization/types.ts';
import { appendEvents, commandMeta, execute, fold, type CommandDeps } from '../execute.ts';
import { decideApiKey, evolveApiKey } from './decide.ts';
import { generateApiKey, hashSecret, PUBLIC_ID_PATTERN } from './secret.ts';
import type { ApiKey } from './types.ts';

export async function createApiKey(deps: CommandDeps, orgId: string): Promise<{ apiKey: string; key: ApiKey; seq: number }> {
  if (!isOrgId(orgId) || !(await deps.store.last<OrganizationEvent>(SUBJECTS.org(orgId)))) {
    throw notFound(`organization ${orgId} not found`);
  }
  const generated = generateApiKey();
  // A new random id: nothing to load; expected sequence 0 still guards it.
  const events = decideApiKey({ type: 'CreateApiKey', orgId, publicId: generated.publicId, secretHash: hashSecret(generated.secret) }, null, commandMeta(deps.clock));
  const seq = await appendEvents(deps.store, SUBJECTS.apiKey(generated.publicId), events, 0);
  return { apiKey: generated.full, key: fold(evolveApiKey, null, events)!, seq };
}

export async function revokeApiKey(deps: CommandDeps, publicId: string): Promise<{ key: ApiKey; seq: number }> {
  if (!PUBLIC_ID_PATTERN.test(publicId)) throw notFound(`api key ${publicId} not found`);
  // Two revokes at once: the one that conflicts reads the revocation and answers 409.
  const { state, seq } = await execute(deps, SUBJECTS.apiKey(publicId), { type: 'RevokeApiKey', publicId }, decideApiKey, evolveApiKey);
  return { key: state!, seq };
}
