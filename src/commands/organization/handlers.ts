import { SUBJECTS } from '../../../streams/subjects.ts';
import { generateWebhookSecret } from '../api-key/secret.ts';
import { notFound } from '../../lib/errors.ts';
import { ID_PATTERN, newId, randomToken } from '../../lib/ids.ts';
import { execute, type CommandDeps } from '../execute.ts';
import { decideOrganization, evolveOrganization } from './decide.ts';
import type { OrganizationCommand, OrganizationSettings, Plan } from './types.ts';

// An id goes into a NATS subject: `*` or `>` there would read and write some other
// organization's events, so anything that is not an id is simply not found.
export const isOrgId = (orgId: string) => ID_PATTERN.test(orgId) && orgId.startsWith('org_');

const run = async (deps: CommandDeps, orgId: string, command: OrganizationCommand) => {
  if (!isOrgId(orgId)) throw notFound(`organization ${orgId} not found`);
  return execute(deps, SUBJECTS.org(orgId), command, decideOrganization, evolveOrganization);
};

/** `ppk_` + 22 characters of the id alphabet (lower-case letters and digits): never a `pm_` monitor token. */
export const newPingKey = () => `ppk_${randomToken(22)}`;
export const PING_KEY_PATTERN = /^ppk_[0-9a-z]{22}$/;

export function createOrganization(deps: CommandDeps, name: string, plan: Plan) {
  const orgId = newId('org');
  return run(deps, orgId, { type: 'CreateOrganization', name, plan, orgId, webhookSecret: generateWebhookSecret(), pingKey: newPingKey() });
}

export const changePlan = (deps: CommandDeps, orgId: string, plan: Plan) => run(deps, orgId, { type: 'ChangePlan', plan });
export const updateSettings = (deps: CommandDeps, orgId: string, settings: OrganizationSettings) =>
  run(deps, orgId, { type: 'UpdateSettings', settings });
export const rotateWebhookSecret = (deps: CommandDeps, orgId: string) =>
  run(deps, orgId, { type: 'RotateWebhookSecret', webhookSecret: generateWebhookSecret() });
export const rotatePingKey = (deps: CommandDeps, orgId: string) => run(deps, orgId, { type: 'RotatePingKey', pingKey: newPingKey() });
/** An organization created before heartbeats gets its ping key here; one that has it changes nothing. */
export const issuePingKey = (deps: CommandDeps, orgId: string) => run(deps, orgId, { type: 'RotatePingKey', pingKey: newPingKey(), onlyIfMissing: true });
