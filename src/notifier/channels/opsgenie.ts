import type { ChannelMessage } from './message.ts';
import { clip, joinUrl, jsonPost, type ChannelFormat, type OpenConfig } from './request.ts';

export const OPSGENIE_API = { us: 'https://api.opsgenie.com', eu: 'https://api.eu.opsgenie.com' } as const;

/** Create alert: `alias` = the resource's id, so the recovery closes this alert and a repeat adds to it. */
export function opsgenieAlert(m: ChannelMessage) {
  return {
    message: clip(m.title, 130),
    alias: clip(m.incident_key, 512),
    description: clip(`${m.line}\n${m.link}`, 15000),
    source: 'jetcron',
    priority: m.severity === 'info' ? ('P5' as const) : ('P2' as const),
    tags: ['jetcron', m.event],
    details: { event: m.event, resource_id: m.source.id, link: m.link, ...(m.status_code !== null ? { status_code: String(m.status_code) } : {}), ...(m.down_reason ? { down_reason: m.down_reason } : {}) },
  };
}

export const opsgenieClose = (m: ChannelMessage) => ({ source: 'jetcron', note: clip(m.line, 25000) });

/** Alert API v2 with `Authorization: GenieKey <api_key>`: create on a failure, close by alias on its recovery. */
export const opsgenie: ChannelFormat = (m, config: OpenConfig) => {
  const base = config.api_url ?? OPSGENIE_API[config.region === 'eu' ? 'eu' : 'us'];
  const auth = { Authorization: `GenieKey ${config.api_key}` };
  const close = jsonPost(joinUrl(base, `/v2/alerts/${encodeURIComponent(m.incident_key)}/close?identifierType=alias`), opsgenieClose(m), auth);
  if (m.severity === 'recovery') return [close];
  const create = jsonPost(joinUrl(base, '/v2/alerts'), opsgenieAlert(m), auth);
  return m.severity === 'info' ? [create, close] : [create];
};
