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
  const load = async (orgId: string) => {
    const row = await deps.db.selectFrom('organizations').selectAll().where('id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Organization not found');
    return organizationResource(row);
  };

  r.get('/organization', handler(async (req, res) => {
    res.json({ data: await load(req.orgId) });
  }));

  r.put('/organization', handler(async (req, res) => {
    const settings = validate<OrganizationSettings>(updateOrganizationSchema, jsonObject(req));
    const { seq } = await updateSettings(deps, req.orgId, settings);
    await deps.watermark.waitFor(seq);
    res.json({ data: await load(req.orgId) });
  }));

  r.post('/organization/webhook-secret/rotate', handler(async (req, res) => {
    const { seq } = await rotateWebhookSecret(deps, req.orgId);
    await deps.watermark.waitFor(seq);
    const org = await load(req.orgId);
    res.json({ data: { webhook_secret: org.webhook_secret }, message: 'Webhook secret rotated' });
  }));

  return r;
}
