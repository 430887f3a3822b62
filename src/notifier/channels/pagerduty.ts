import type { ChannelMessage } from './message.ts';
import { clip, joinUrl, jsonPost, type ChannelFormat, type OpenConfig } from './request.ts';

export const PAGERDUTY_API = 'https://events.pagerduty.com';

/** Events API v2: a failure triggers the resource's incident (`dedup_key` = its id), its recovery resolves it. */
export function pagerdutyTrigger(m: ChannelMessage, config: OpenConfig) {
  return {
    routing_key: config.routing_key!,
    event_action: 'trigger' as const,
    dedup_key: m.incident_key,
    payload: {
      summary: clip(m.line, 1024),
      source: m.source.url ?? `jetcron ${m.source.type} ${m.source.id}`,
      severity: m.severity === 'info' ? ('info' as const) : ('error' as const),
      timestamp: m.at,
      component: m.source.name || m.source.id,
      group: m.source.type,
      class: m.event,
      custom_details: { event: m.event, resource_id: m.source.id, status_code: m.status_code, down_reason: m.down_reason },
    },
    client: 'jetcron',
    client_url: m.link,
    links: [{ href: m.link, text: 'Open in jetcron' }],
  };
}

export const pagerdutyResolve = (m: ChannelMessage, config: OpenConfig) =>
  ({ routing_key: config.routing_key!, event_action: 'resolve' as const, dedup_key: m.incident_key });

/** `{api_url}/v2/enqueue`; a test triggers its own incident and resolves it at once. */
export const pagerduty: ChannelFormat = (m, config) => {
  const url = joinUrl(config.api_url ?? PAGERDUTY_API, '/v2/enqueue');
  if (m.severity === 'recovery') return [jsonPost(url, pagerdutyResolve(m, config))];
  const trigger = jsonPost(url, pagerdutyTrigger(m, config));
  return m.severity === 'info' ? [trigger, jsonPost(url, pagerdutyResolve(m, config))] : [trigger];
};
