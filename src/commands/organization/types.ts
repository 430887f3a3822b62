import type { Envelope } from '../envelope.ts';

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
  /**
   * The secret a rotation replaced, still signing beside the new one until
   * `previous_webhook_secret_expires_at` (24 h, wall clock). Absent in events written
   * before rotations overlapped: no previous secret.
   */
  previous_webhook_secret?: string | null;
  previous_webhook_secret_expires_at?: string | null;
  /**
   * Names the organization in `{root}/ping/<ping_key>/<slug>`: `ppk_` + 22 lower-case
   * letters and digits. Organizations created before heartbeats have none in their
   * events until one is issued (the first `GET /organization` or a rotation).
   */
  ping_key?: string | null;
  /**
   * Destination health: how long a schedule or forward URL fails before it is disabled
   * (a duration such as `5d`, scaled by JETCRON_TIME_SCALE); null = never. Absent in
   * events written before the setting: the default, `5d`.
   */
  auto_disable_after?: string | null;
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
  Pick<Organization, 'notification_email' | 'notification_webhook_url' | 'notify_on_failure' | 'notify_on_recovery' | 'auto_disable_after'>
>;

export type OrganizationCommand =
  | { type: 'CreateOrganization'; name: string; plan: Plan; orgId: string; webhookSecret: string; pingKey: string }
  | { type: 'ChangePlan'; plan: Plan }
  | { type: 'UpdateSettings'; settings: OrganizationSettings }
  | { type: 'RotateWebhookSecret'; webhookSecret: string }
  /** `onlyIfMissing`: issue a ping key to an organization that has none, else nothing. */
  | { type: 'RotatePingKey'; pingKey: string; onlyIfMissing?: boolean };
