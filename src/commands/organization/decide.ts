import { ApiError, notFound, unprocessable } from '../../lib/errors.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import { emptyAsNone } from '../payload-checks.ts';
import type { Organization, OrganizationCommand, OrganizationEvent } from './types.ts';
import { durationProblem, parseDuration } from '../../lib/duration.ts';
import { DEFAULT_AUTO_DISABLE_AFTER } from '../destination-health.ts';

/**
 * The organization's `auto_disable_after` in real milliseconds (scaled by
 * `scaleWait`, JETCRON_TIME_SCALE); null: never disable.
 */
export function autoDisableAfterMs(org: Pick<Organization, 'auto_disable_after'>, scaleWait: (ms: number) => number): number | null {
  const text = org.auto_disable_after === undefined ? DEFAULT_AUTO_DISABLE_AFTER : org.auto_disable_after;
  if (text === null) return null;
  const ms = parseDuration(text);
  return ms === undefined ? null : scaleWait(ms);
}

/** How long the secret a rotation replaced keeps signing beside the new one (wall clock, not scaled). */
export const ROTATION_OVERLAP_MS = 24 * 3_600_000;

/**
 * The secrets that sign a request sent at `nowMs`: the current one first, then, for
 * 24 hours after a rotation, the one it replaced (a receiver holding either verifies).
 */
export function signingSecrets(org: Organization, nowMs: number): string[] {
  const until = org.previous_webhook_secret_expires_at;
  return org.previous_webhook_secret && until && nowMs < Date.parse(until) ? [org.webhook_secret, org.previous_webhook_secret] : [org.webhook_secret];
}

/** When the previous secret stops signing, while it still does; else null. */
export function previousSecretExpiry(org: Organization, nowMs: number): string | null {
  return signingSecrets(org, nowMs).length > 1 ? org.previous_webhook_secret_expires_at! : null;
}

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
      ping_key: command.pingKey,
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
      const after = command.settings.auto_disable_after;
      const problem = typeof after === 'string' ? durationProblem(after) : null;
      if (problem) throw unprocessable(`auto_disable_after ${problem} (or null: never)`, 'auto_disable_after');
      // An empty address is none (see `emptyAsNone`): no email, no webhook.
      const settings = emptyAsNone(command.settings, ['notification_email', 'notification_webhook_url']);
      return [{
        ...base,
        org_id,
        type: 'OrganizationSettingsUpdated',
        data: { organization: { ...state, ...settings, updated_at: meta.now }, changed },
      }];
    }
    case 'RotateWebhookSecret':
      return [{
        ...base,
        org_id,
        type: 'WebhookSecretRotated',
        data: {
          organization: {
            ...state,
            webhook_secret: command.webhookSecret,
            previous_webhook_secret: state.webhook_secret,
            previous_webhook_secret_expires_at: new Date(meta.nowMs + ROTATION_OVERLAP_MS).toISOString(),
            updated_at: meta.now,
          },
        },
      }];
    // A settings change naming `ping_key`: every reader of organization events already follows it.
    case 'RotatePingKey':
      if (command.onlyIfMissing && state.ping_key) return [];
      return [{
        ...base,
        org_id,
        type: 'OrganizationSettingsUpdated',
        data: { organization: { ...state, ping_key: command.pingKey, updated_at: meta.now }, changed: ['ping_key'] },
      }];
    default:
      return unreachable(command);
  }
}
