import { Router } from 'express';
import type { Selectable } from 'kysely';
import { SUBJECTS } from '../../../streams/subjects.ts';
import { channelIn, createChannel, deleteChannel, loadChannels, updateChannel } from '../../commands/channel/handlers.ts';
import type { ChannelKind, ConfigInput } from '../../commands/channel/kinds.ts';
import type { ChannelInput, ChannelTestEvent } from '../../commands/channel/types.ts';
import type { ChannelsTable } from '../../db/schema.ts';
import { notFound } from '../../lib/errors.ts';
import { ID_PATTERN, newId } from '../../lib/ids.ts';
import { testMessage } from '../../notifier/channels/message.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { createChannelSchema, testChannelSchema, updateChannelSchema } from '../schemas/channel.ts';
import { validate } from '../validate.ts';

const iso = (d: Date | string | null) => (d == null ? null : new Date(d).toISOString());

/** `GET|POST /channels`, `GET|PUT|DELETE /channels/{id}`, `POST /channels/{id}/test` (the contract's "Notification channels"). */
export function channelRoutes(deps: ApiDeps, rootUrl: () => string): Router {
  const r = Router();
  const resource = (row: Selectable<ChannelsTable>) => ({
    id: row.id,
    ...(row.doc as Record<string, unknown>),
    last_delivery: row.last_delivery ?? null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });
  const load = async (orgId: string, id: string) => {
    const row = await deps.db.selectFrom('channels').selectAll().where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) throw notFound('Channel not found');
    return row;
  };
  const answer = async (orgId: string, id: string, seq: number) => {
    await deps.reads.wrote(orgId, seq);
    await deps.reads.caughtUp(orgId);
    return resource(await load(orgId, id));
  };
  const known = (id: string) => {
    if (!ID_PATTERN.test(id) || !id.startsWith('chn_')) throw notFound('Channel not found');
    return id;
  };

  r.get('/channels', handler(async (req, res) => {
    const rows = await deps.db.selectFrom('channels').selectAll().where('org_id', '=', req.orgId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    res.json({ data: rows.map(resource) });
  }));
  r.get('/channels/:id', handler(async (req, res) => void res.json({ data: resource(await load(req.orgId, known(req.params.id!))) })));
  r.post('/channels', handler(async (req, res) => {
    const input = validate<ChannelInput & { kind: ChannelKind; name: string; config: ConfigInput }>(createChannelSchema, jsonObject(req));
    const { events, seq } = await createChannel(deps, deps.secrets, req.orgId, input);
    res.status(201).json({ data: await answer(req.orgId, events[0]!.data.channel.id, seq) });
  }));
  r.put('/channels/:id', handler(async (req, res) => {
    const input = validate<ChannelInput>(updateChannelSchema, jsonObject(req));
    const id = known(req.params.id!);
    const { seq } = await updateChannel(deps, deps.secrets, req.orgId, id, input);
    res.json({ data: await answer(req.orgId, id, seq) });
  }));
  r.delete('/channels/:id', handler(async (req, res) => {
    const { seq } = await deleteChannel(deps, req.orgId, known(req.params.id!));
    await deps.reads.wrote(req.orgId, seq);
    res.status(204).end();
  }));

  /**
   * Sends the channel a test message now, from this process, and answers with what the
   * receiver said. Recorded (`ChannelTested`), so it is the channel's `last_delivery`.
   */
  r.post('/channels/:id/test', handler(async (req, res) => {
    validate(testChannelSchema, jsonObject(req, true));
    const orgId = req.orgId;
    const channel = channelIn(await loadChannels(deps.store, orgId), known(req.params.id!));
    if (!channel) throw notFound('Channel not found');
    const nowMs = deps.clock.now();
    const at = new Date(nowMs).toISOString();
    const notificationId = newId('ntf', nowMs);
    const result = await deps.channelSender(channel, testMessage(channel, at, rootUrl()), { notificationId, signingId: notificationId });
    const delivery = { at, ok: result.ok, status_code: result.status_code, error: result.ok ? null : result.error };
    const event: ChannelTestEvent = {
      type: 'ChannelTested', id: `${notificationId}.test`, at, org_id: orgId,
      data: { notification_id: notificationId, channel: { id: channel.id, kind: channel.kind, name: channel.name }, delivery },
    };
    await deps.reads.wrote(orgId, await deps.store.append(SUBJECTS.notification(orgId, notificationId), event));
    res.json({ data: { ok: delivery.ok, status_code: delivery.status_code, error: delivery.error } });
  }));
  return r;
}
