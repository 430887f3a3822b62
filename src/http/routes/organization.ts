import { Router } from 'express';
import { issuePingKey, rotatePingKey, rotateWebhookSecret, updateSettings } from '../../commands/organization/handlers.ts';
import type { Organization, OrganizationSettings } from '../../commands/organization/types.ts';
import { notFound } from '../../lib/errors.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { updateOrganizationSchema } from '../schemas/organization.ts';
import { organizationResource } from '../serializers.ts';
import { validate } from '../validate.ts';

export function organizationRoutes(deps: ApiDeps): Router {
  const r = Router();
  // Answered from the organization's event-carried state, so a key minted by the CLI a
  // moment ago sees its organization before the projector has caught up.
  const load = async (orgId: string) => {
    let org = await deps.directory.organization(orgId);
    if (!org) throw notFound('Organization not found');
    // Created before heartbeats: its ping key is issued when it is first shown.
    if (!org.ping_key) org = await remembered(orgId, await issuePingKey(deps, orgId));
    return organizationResource(org, Date.now());
  };
  const remembered = async (orgId: string, { state, seq }: { state: Organization | null; seq: number }) => {
    deps.directory.remember(state!);
    await deps.reads.wrote(orgId, seq);
    return state!;
  };

  r.get('/organization', handler(async (req, res) => {
    res.json({ data: await load(req.orgId) });
  }));

  r.put('/organization', handler(async (req, res) => {
    const settings = validate<OrganizationSettings>(updateOrganizationSchema, jsonObject(req));
    const { state, seq } = await updateSettings(deps, req.orgId, settings);
    deps.directory.remember(state!);
    await deps.reads.wrote(req.orgId, seq);
    res.json({ data: organizationResource(state!, Date.now()) });
  }));

  r.post('/organization/webhook-secret/rotate', handler(async (req, res) => {
    const { state, seq } = await rotateWebhookSecret(deps, req.orgId);
    deps.directory.remember(state!);
    await deps.reads.wrote(req.orgId, seq);
    const { webhook_secret, previous_webhook_secret_expires_at } = organizationResource(state!, Date.now());
    res.json({ data: { webhook_secret, previous_webhook_secret_expires_at }, message: 'Webhook secret rotated; the previous secret also signs until previous_webhook_secret_expires_at' });
  }));

  r.post('/organization/ping-key/rotate', handler(async (req, res) => {
    const org = await remembered(req.orgId, await rotatePingKey(deps, req.orgId));
    res.json({ data: { ping_key: org.ping_key }, message: 'Ping key rotated' });
  }));

  return r;
}
