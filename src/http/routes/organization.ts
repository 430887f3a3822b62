import { Router } from 'express';
import { rotateWebhookSecret, updateSettings } from '../../commands/organization/handlers.ts';
import type { OrganizationSettings } from '../../commands/organization/types.ts';
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
    const org = await deps.directory.organization(orgId);
    if (!org) throw notFound('Organization not found');
    return organizationResource(org);
  };

  r.get('/organization', handler(async (req, res) => {
    res.json({ data: await load(req.orgId) });
  }));

  r.put('/organization', handler(async (req, res) => {
    const settings = validate<OrganizationSettings>(updateOrganizationSchema, jsonObject(req));
    const { state, seq } = await updateSettings(deps, req.orgId, settings);
    deps.directory.remember(state!);
    await deps.reads.wrote(req.orgId, seq);
    res.json({ data: organizationResource(state!) });
  }));

  r.post('/organization/webhook-secret/rotate', handler(async (req, res) => {
    const { state, seq } = await rotateWebhookSecret(deps, req.orgId);
    deps.directory.remember(state!);
    await deps.reads.wrote(req.orgId, seq);
    res.json({ data: { webhook_secret: state!.webhook_secret }, message: 'Webhook secret rotated' });
  }));

  return r;
}
