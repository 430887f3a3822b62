import { describe, test } from 'node:test';
import { decideOrganization, evolveOrganization } from '../../src/commands/organization/decide.ts';
import type { OrganizationCommand } from '../../src/commands/organization/types.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideOrganization, evolveOrganization);
const ORG = 'org_acme';
const createOrg: OrganizationCommand = { type: 'CreateOrganization', orgId: ORG, name: 'acme', plan: 'free', webhookSecret: 'whsec_1' };
const created = decideOrganization(createOrg, null, meta());
const org = spec.stateAfter(created)!;

describe('organization decider', () => {
  test('create: notifications on, no channels yet', () => {
    spec.given([]).when(createOrg).then([{
      type: 'OrganizationCreated',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: {
        organization: {
          id: ORG, name: 'acme', plan: 'free', webhook_secret: 'whsec_1', notification_email: null, notification_webhook_url: null,
          notify_on_failure: true, notify_on_recovery: true, created_at: NOW, updated_at: NOW,
        },
      },
    }]);
  });

  test('create twice: 409', () => {
    spec.given(created).when(createOrg).thenRefuses({ status: 409 });
  });

  test('plan change keeps the previous plan', () => {
    spec.given(created).when({ type: 'ChangePlan', plan: 'pro' }, meta(later(1000))).then([{
      type: 'OrganizationPlanChanged',
      id: 'evt_test',
      at: later(1000),
      org_id: ORG,
      data: { organization: { ...org, plan: 'pro', updated_at: later(1000) }, previous_plan: 'free' },
    }]);
  });

  test('settings: the fields sent, named in changed; secret rotation', () => {
    spec.given(created).when({ type: 'UpdateSettings', settings: { notification_email: 'ops@example.com', notify_on_recovery: false } })
      .thenMatches([{ type: 'OrganizationSettingsUpdated', data: { organization: { notification_email: 'ops@example.com', notify_on_recovery: false, notify_on_failure: true }, changed: ['notification_email', 'notify_on_recovery'] } }]);
    spec.given(created).when({ type: 'RotateWebhookSecret', webhookSecret: 'whsec_2' }).thenMatches([{ type: 'WebhookSecretRotated', data: { organization: { webhook_secret: 'whsec_2' } } }]);
  });

  test('no organization: 404', () => {
    spec.given([]).when({ type: 'ChangePlan', plan: 'pro' }).thenRefuses({ status: 404, message: 'Organization not found' });
  });
});
