import { SUBJECTS } from '../../../streams/definitions.ts';
import { generateWebhookSecret } from '../api-key/secret.ts';
import { newId } from '../../lib/ids.ts';
import { execute, type CommandDeps } from '../execute.ts';
import { decideOrganization, evolveOrganization } from './decide.ts';
import type { OrganizationCommand, OrganizationSettings, Plan } from './types.ts';

const run = (deps: CommandDeps, orgId: string, command: OrganizationCommand) =>
  execute(deps, SUBJECTS.org(orgId), command, decideOrganization, evolveOrganization);

export function createOrganization(deps: CommandDeps, name: string, plan: Plan) {
  const orgId = newId('org');
  return run(deps, orgId, { type: 'CreateOrganization', name, plan, orgId, webhookSecret: generateWebhookSecret() });
}

export const changePlan = (deps: CommandDeps, orgId: string, plan: Plan) => run(deps, orgId, { type: 'ChangePlan', plan });
export const updateSettings = (deps: CommandDeps, orgId: string, settings: OrganizationSettings) =>
  run(deps, orgId, { type: 'UpdateSettings', settings });
export const rotateWebhookSecret = (deps: CommandDeps, orgId: string) =>
  run(deps, orgId, { type: 'RotateWebhookSecret', webhookSecret: generateWebhookSecret() });
