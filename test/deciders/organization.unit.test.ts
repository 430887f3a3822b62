import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideOrganization, evolveOrganization, previousSecretExpiry, ROTATION_OVERLAP_MS, signingSecrets } from '../../src/commands/organization/decide.ts';
import type { OrganizationCommand } from '../../src/commands/organization/types.ts';
import { deciderSpec, later, meta, NOW, NOW_MS } from './spec.ts';

const spec = deciderSpec(decideOrganization, evolveOrganization);
const ORG = 'org_acme';
const createOrg: OrganizationCommand = { type: 'CreateOrganization', orgId: ORG, name: 'acme', plan: 'free', webhookSecret: 'whsec_1', pingKey: 'ppk_aaaaaaaaaaaaaaaaaaaaaa' };
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
          id: ORG, name: 'acme', plan: 'free', webhook_secret: 'whsec_1', ping_key: 'ppk_aaaaaaaaaaaaaaaaaaaaaa', notification_email: null, notification_webhook_url: null,
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

  test('rotation: the replaced secret signs beside the new one for 24 hours, then only the new one', () => {
    const [rotated] = decideOrganization({ type: 'RotateWebhookSecret', webhookSecret: 'whsec_2' }, org, meta());
    const after = rotated!.data.organization;
    assert.equal(after.previous_webhook_secret, 'whsec_1');
    assert.equal(after.previous_webhook_secret_expires_at, later(ROTATION_OVERLAP_MS));
    assert.deepEqual(signingSecrets(after, NOW_MS), ['whsec_2', 'whsec_1']);
    assert.deepEqual(signingSecrets(after, NOW_MS + ROTATION_OVERLAP_MS - 1), ['whsec_2', 'whsec_1']);
    assert.equal(previousSecretExpiry(after, NOW_MS), later(ROTATION_OVERLAP_MS));
    assert.deepEqual(signingSecrets(after, NOW_MS + ROTATION_OVERLAP_MS), ['whsec_2']);
    assert.equal(previousSecretExpiry(after, NOW_MS + ROTATION_OVERLAP_MS), null);
    // A second rotation inside the window: the secret it replaces is the one that overlaps.
    const [again] = decideOrganization({ type: 'RotateWebhookSecret', webhookSecret: 'whsec_3' }, after, meta(later(1000)));
    assert.deepEqual(signingSecrets(again!.data.organization, NOW_MS + 1000), ['whsec_3', 'whsec_2']);
    // An organization from events written before rotations overlapped signs with its one secret.
    assert.deepEqual(signingSecrets(org, NOW_MS), ['whsec_1']);
  });

  test('no organization: 404', () => {
    spec.given([]).when({ type: 'ChangePlan', plan: 'pro' }).thenRefuses({ status: 404, message: 'Organization not found' });
  });

  test('ping key: rotation is a settings change naming ping_key; issuing one to an organization that has one changes nothing', () => {
    spec.given(created).when({ type: 'RotatePingKey', pingKey: 'ppk_bbbbbbbbbbbbbbbbbbbbbb' }, meta(later(1000))).then([{
      type: 'OrganizationSettingsUpdated',
      id: 'evt_test',
      at: later(1000),
      org_id: ORG,
      data: { organization: { ...org, ping_key: 'ppk_bbbbbbbbbbbbbbbbbbbbbb', updated_at: later(1000) }, changed: ['ping_key'] },
    }]);
    spec.given(created).when({ type: 'RotatePingKey', pingKey: 'ppk_bbbbbbbbbbbbbbbbbbbbbb', onlyIfMissing: true }).thenNothing();
    // An organization created before heartbeats has none in its events.
    const { ping_key: _k, ...before } = org;
    spec.givenState(before).when({ type: 'RotatePingKey', pingKey: 'ppk_cccccccccccccccccccccc', onlyIfMissing: true })
      .thenMatches([{ type: 'OrganizationSettingsUpdated', data: { organization: { ping_key: 'ppk_cccccccccccccccccccccc' }, changed: ['ping_key'] } }]);
  });
});
