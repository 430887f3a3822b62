import type { NotificationEventName, NotifySourceType } from '../../commands/notification/types.ts';
import { emailMessage, eventName, summaryLine, webhookPayload, type ExecutionSummary, type NotifySource } from '../message.ts';
import type { Transition } from '../state.ts';

/** What a channel is told, whatever its kind: each vendor's format (one file each beside this one) is written from it. */
export interface ChannelMessage {
  /** The notification event, or `test` for `POST /channels/{id}/test`. */
  event: NotificationEventName | 'test';
  /** failure (a failure, a going down, being disabled), recovery, or info (a test). */
  severity: 'failure' | 'recovery' | 'info';
  /** Short, for a title: `Task "nightly-report" failed`. */
  title: string;
  /** The one line: resource name, event, status code or down reason, time. */
  line: string;
  /** The console page of the resource (`{root_url}/#/…`). */
  link: string;
  /** When it happened (ISO 8601). */
  at: string;
  source: { type: NotifySourceType | 'channel'; id: string; name: string; url: string | null };
  /** One incident per resource: PagerDuty's `dedup_key`, Opsgenie's `alias`. */
  incident_key: string;
  status_code: number | null;
  down_reason: string | null;
  /** The organization webhook's JSON (kind `webhook`). */
  payload: Record<string, unknown>;
  /** Kind `email`. */
  email: { subject: string; text: string };
}

const SECTIONS: Record<NotifySourceType, string> = { task: 'tasks', schedule: 'schedules', monitor: 'monitors', endpoint: 'endpoints' };

/** `2026-12-06 10:00:05 UTC`: a time every reader reads alike. */
export function utcText(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** The console page of a resource, or of a channel. */
export const consoleLink = (rootUrl: string, section: string, id: string) => `${rootUrl}/#/${section}/${encodeURIComponent(id)}`;

function titleOf(source: NotifySource, transition: Transition, execution: ExecutionSummary | null): string {
  const label = `${source.type[0]!.toUpperCase()}${source.type.slice(1)} "${source.name || source.id}"`;
  if (transition === 'disabled') return `${label} was disabled`;
  if (source.type === 'monitor') return `${label} is ${transition === 'failed' ? 'down' : 'up again'}`;
  if (transition === 'recovered') return `${label} recovered`;
  return `${label} ${execution?.status === 'timeout' ? 'timed out' : 'failed'}`;
}

/** A notification as channels are told it. `at`: when the transition happened. */
export function channelMessage(input: {
  source: NotifySource;
  transition: Transition;
  execution: ExecutionSummary | null;
  at: string;
  rootUrl: string;
}): ChannelMessage {
  const { source, transition, execution, at } = input;
  const event = eventName(source.type, transition);
  const link = consoleLink(input.rootUrl, SECTIONS[source.type], source.id);
  const line = `${summaryLine(source, transition, execution)} [${event}, ${utcText(at)}]`;
  const email = emailMessage(source, transition, execution);
  return {
    event,
    severity: transition === 'recovered' ? 'recovery' : 'failure',
    title: titleOf(source, transition, execution),
    line,
    link,
    at,
    source: { type: source.type, id: source.id, name: source.name, url: source.url },
    incident_key: source.id,
    status_code: execution?.status_code ?? null,
    down_reason: source.down?.down_reason ?? null,
    payload: webhookPayload(source, transition, execution, true),
    email: { subject: email.subject, text: `${email.text}\n${link}\n` },
  };
}

/** The message `POST /channels/{id}/test` sends. */
export function testMessage(channel: { id: string; name: string; kind: string }, at: string, rootUrl: string): ChannelMessage {
  const link = consoleLink(rootUrl, 'channels', channel.id);
  const line = `jetcron: a test message for channel "${channel.name}" (${channel.kind}): it reaches you [test, ${utcText(at)}]`;
  return {
    event: 'test',
    severity: 'info',
    title: `Test message for "${channel.name}"`,
    line,
    link,
    at,
    source: { type: 'channel', id: channel.id, name: channel.name, url: null },
    // Its own incident, resolved right after (see pagerduty.ts, opsgenie.ts): a test pages no one for long.
    incident_key: `jetcron-test-${channel.id}`,
    status_code: null,
    down_reason: null,
    payload: { event: 'test', channel: { id: channel.id, name: channel.name, kind: channel.kind }, text: line, content: line },
    email: { subject: `[jetcron] Test message for channel "${channel.name}"`, text: `${line}\n\n${link}\n` },
  };
}
