import type { NotificationEventName, NotifySourceType } from '../commands/notification/types.ts';
import type { Transition } from './state.ts';

/** The resource a notification is about, with its notification settings. */
export interface NotifySource {
  type: NotifySourceType;
  id: string;
  org_id: string;
  name: string;
  /** The target URL (tasks, schedules); none for monitors and endpoints (an endpoint may forward to ten). */
  url: string | null;
  /** null = the organization's setting, true = always, false = never. */
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  on_failure_url: string | null;
  on_recovery_url: string | null;
}

/** The execution part of a notification: what its last attempt ended with. */
export interface ExecutionSummary {
  id: string;
  status: string;
  status_code: number | null;
  error_message: string | null;
  attempt: number;
  scheduled_for: string;
  finished_at: string;
}

const LABEL: Record<NotifySourceType, string> = { task: 'Task', schedule: 'Schedule', monitor: 'Monitor', endpoint: 'Endpoint' };

export function eventName(type: NotifySourceType, transition: Transition): NotificationEventName {
  if (type === 'monitor') return transition === 'failed' ? 'monitor.down' : 'monitor.recovered';
  return `${type}.${transition}`;
}

function what(source: NotifySource): string {
  return `${LABEL[source.type]} "${source.name || source.id}"`;
}

function outcomeText(e: ExecutionSummary): string {
  if (e.status === 'timeout') return e.error_message ?? 'timed out';
  if (e.status_code !== null) return `HTTP ${e.status_code}`;
  return e.error_message ?? e.status;
}

/** One line for chat tools (Slack/Mattermost/Google Chat `text`, Discord `content`). */
export function summaryLine(source: NotifySource, transition: Transition, execution: ExecutionSummary | null): string {
  const attempts = execution ? ` after ${execution.attempt} attempt${execution.attempt === 1 ? '' : 's'}` : '';
  if (source.type === 'monitor') {
    return transition === 'failed' ? `jetcron: ${what(source)} is down` : `jetcron: ${what(source)} is up again`;
  }
  if (transition === 'failed') {
    const verb = execution?.status === 'timeout' ? 'timed out' : 'failed';
    const detail = execution ? `: ${outcomeText(execution)}${attempts}` : '';
    return `jetcron: ${what(source)} ${verb}${detail}${source.url ? ` (${source.url})` : ''}`;
  }
  const detail = execution ? `: ${outcomeText(execution)}` : '';
  return `jetcron: ${what(source)} recovered${detail}${source.url ? ` (${source.url})` : ''}`;
}

/**
 * The webhook JSON: `{event, <source type>: {id, name, url?}, execution?, text?, content?}`.
 * `chat` adds `text` and `content` (the organization webhook); the resource's own
 * on_failure_url / on_recovery_url get the same JSON without them.
 */
export function webhookPayload(source: NotifySource, transition: Transition, execution: ExecutionSummary | null, chat: boolean) {
  const line = summaryLine(source, transition, execution);
  return {
    event: eventName(source.type, transition),
    [source.type]: { id: source.id, name: source.name, ...(source.url !== null ? { url: source.url } : {}) },
    ...(execution ? { execution } : {}),
    ...(chat ? { text: line, content: line } : {}),
  };
}

export function emailMessage(source: NotifySource, transition: Transition, execution: ExecutionSummary | null): { subject: string; text: string } {
  const state = source.type === 'monitor'
    ? (transition === 'failed' ? 'is down' : 'is up again')
    : transition === 'failed'
      ? (execution?.status === 'timeout' ? 'timed out' : 'failed')
      : 'recovered';
  const lines = [
    summaryLine(source, transition, execution),
    '',
    `${LABEL[source.type]}: ${source.name || source.id} (${source.id})`,
  ];
  if (source.url) lines.push(`URL: ${source.url}`);
  if (execution) {
    lines.push(
      `Execution: ${execution.id}`,
      `Status: ${execution.status}`,
      `HTTP status: ${execution.status_code ?? '-'}`,
      `Attempt: ${execution.attempt}`,
      `Scheduled for: ${execution.scheduled_for}`,
      `Finished at: ${execution.finished_at}`,
    );
    if (execution.error_message) lines.push(`Error: ${execution.error_message}`);
  }
  lines.push('', `Event: ${eventName(source.type, transition)}`);
  return { subject: `[jetcron] ${what(source)} ${state}`, text: `${lines.join('\n')}\n` };
}
