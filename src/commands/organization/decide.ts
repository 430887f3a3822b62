import { ApiError, notFound } from '../../lib/errors.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import type { Organization, OrganizationCommand, OrganizationEvent } from './types.ts';

export function evolveOrganization(_state: Organization | null, event: OrganizationEvent): Organization {
  return event.data.organization;
}

export function decideOrganization(
  command: OrganizationCommand,
  state: Organization | null,
  meta: CommandMeta,
): OrganizationEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CreateOrganization') {
    if (state) throw new ApiError(409, `organization ${command.orgId} already exists`);
    const organization: Organization = {
      id: command.orgId,
      name: command.name,
      plan: command.plan,
      webhook_secret: command.webhookSecret,
      notification_email: null,
      notification_webhook_url: null,
      notify_on_failure: true,
      notify_on_recovery: true,
      created_at: meta.now,
      updated_at: meta.now,
    };
    return [{ ...base, type: 'OrganizationCreated', org_id: organization.id, data: { organization } }];
  }
  if (!state) throw notFound('Organization not found');
  const org_id = state.id;
  switch (command.type) {
    case 'ChangePlan':
      return [{
        ...base,
        org_id,
        type: 'OrganizationPlanChanged',
        data: { organization: { ...state, plan: command.plan, updated_at: meta.now }, previous_plan: state.plan },
      }];
    case 'UpdateSettings': {
      const changed = Object.keys(command.settings);
      return [{
        ...base,
        org_id,
        type: 'OrganizationSettingsUpdated',
        data: { organization: { ...state, ...command.settings, updated_at: meta.now }, changed },
      }];
    }
    case 'RotateWebhookSecret':
      return [{
        ...base,
        org_id,
        type: 'WebhookSecretRotated',
        data: { organization: { ...state, webhook_secret: command.webhookSecret, updated_at: meta.now } },
      }];
    default:
      return unreachable(command);
  }
}
