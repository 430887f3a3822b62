import type { ChannelMessage } from './message.ts';
import { jsonPost, type ChannelFormat } from './request.ts';

const COLOURS = { failure: 'Attention', recovery: 'Good', info: 'Accent' } as const;

/** The Adaptive Card (1.4, what Teams Workflows renders): a title, the line, the facts and a button to the resource. */
export function teamsCard(m: ChannelMessage) {
  const facts = [
    { title: 'Event', value: m.event },
    ...(m.status_code !== null ? [{ title: 'Status code', value: String(m.status_code) }] : []),
    ...(m.down_reason ? [{ title: 'Down reason', value: m.down_reason }] : []),
    { title: 'At', value: m.at },
  ];
  return {
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    type: 'AdaptiveCard' as const,
    version: '1.4',
    body: [
      { type: 'TextBlock' as const, text: m.title, weight: 'Bolder' as const, size: 'Medium' as const, color: COLOURS[m.severity], wrap: true },
      { type: 'TextBlock' as const, text: m.line, wrap: true },
      { type: 'FactSet' as const, facts },
    ],
    actions: [{ type: 'Action.OpenUrl' as const, title: 'Open in jetcron', url: m.link }],
  };
}

/** A Workflows webhook message: one attachment, the Adaptive Card. */
export const teamsPayload = (m: ChannelMessage) => ({
  type: 'message' as const,
  attachments: [{ contentType: 'application/vnd.microsoft.card.adaptive' as const, contentUrl: null, content: teamsCard(m) }],
});

export const teams: ChannelFormat = (m, config) => [jsonPost(config.webhook_url!, teamsPayload(m))];
