import type { Envelope } from '../../events/envelope.ts';

export type Plan = 'free' | 'pro';

export interface Organization {
  id: string;
  name: string;
  plan: Plan;
  webhook_secret: string;
  notification_email: string | null;
  notification_webhook_url: string | null;
  notify_on_failure: boolean;
  notify_on_recovery: boolean;
  created_at: string;
  updated_at: string;
}

// Each event carries the organization as it is after the event, so the current
// state is the subject's last message (one direct get, no fold over history).
export type OrganizationEvent =
  | Envelope<'OrganizationCreated', { organization: Organization }>
  | Envelope<'OrganizationPlanChanged', { organization: Organization; previous_plan: Plan }>
  | Envelope<'OrganizationSettingsUpdated', { organization: Organization; changed: string[] }>
  | Envelope<'WebhookSecretRotated', { organization: Organization }>;

export type OrganizationSettings = Partial<
  Pick<Organization, 'notification_email' | 'notification_webhook_url' | 'notify_on_failure' | 'notify_on_recovery'>
>;

export type OrganizationCommand =
  | { type: 'CreateOrganization'; name: string; plan: Plan; orgId: string; webhookSecret: string }
  | { type: 'ChangePlan'; plan: Plan }
  | { type: 'UpdateSettings'; settings: OrganizationSettings }
  | { type: 'RotateWebhookSecret'; webhookSecret: string };
