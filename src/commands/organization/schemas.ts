import { agree, Bool, Nullable, OneOf, Opt, Str, Time, Type, type Disagreeing } from '../schema-kit.ts';

const plan = OneOf(['free', 'pro'] as const);
const organizationSchema = Type.Object({
  id: Str('`org_…`'),
  name: Str(),
  plan,
  webhook_secret: Str(),
  notification_email: Nullable(Str()),
  notification_webhook_url: Nullable(Str()),
  notify_on_failure: Bool(),
  notify_on_recovery: Bool(),
  previous_webhook_secret: Opt(Nullable(Str('The secret a rotation replaced, still signing until it expires'))),
  previous_webhook_secret_expires_at: Opt(Nullable(Time())),
  ping_key: Opt(Nullable(Str('`ppk_…`: names the organization in ping URLs; absent in events of organizations created before heartbeats'))),
  auto_disable_after: Opt(Nullable(Str('Destination health: a duration such as `5d` (scaled by JETCRON_TIME_SCALE); null: never; absent: `5d`'))),
  created_at: Time(),
  updated_at: Time(),
});

export const ORGANIZATION_EVENT_SCHEMAS = {
  OrganizationCreated: Type.Object({ organization: organizationSchema }),
  OrganizationPlanChanged: Type.Object({ organization: organizationSchema, previous_plan: plan }),
  OrganizationSettingsUpdated: Type.Object({ organization: organizationSchema, changed: Type.Array(Str()) }),
  WebhookSecretRotated: Type.Object({ organization: organizationSchema }),
};
agree<Disagreeing<typeof ORGANIZATION_EVENT_SCHEMAS>>();
