import type { NotificationEventName, NotifySourceType } from '../commands/notification/types.ts';
import type { DownReason, MonitorEvent } from '../commands/monitor/types.ts';
import type { Transition } from './state.ts';
import type { FinalRun } from '../commands/destination-health.ts';

/** Why a monitor went down, as its notification says it: the reason and what showed it. */
export interface MonitorDown {
  down_reason: DownReason;
  /** `exit_status`: the status the job exited with. */
  exit_status?: number | null;
  /** `too_fast` (and an end that failed after a start): how long the run took. */
  duration_ms?: number | null;
  /** `too_long`: when the run that never ended started. */
  run_started_at?: string;
}

export function monitorDown(data: Extract<MonitorEvent, { type: 'MonitorWentDown' }>['data']): MonitorDown {
  const down: MonitorDown = { down_reason: data.reason };
  if (data.ping?.exit_status != null) down.exit_status = data.ping.exit_status;
  if (data.ping?.duration_ms != null) down.duration_ms = data.ping.duration_ms;
  if (data.run) down.run_started_at = data.run.started_at;
  return down;
}

function downText(d: MonitorDown): string {
  switch (d.down_reason) {
    case 'missed':
      return 'no ping in time';
    case 'failed':
      return 'the job signalled a failure';
    case 'exit_status':
      return `the job exited with status ${d.exit_status ?? '?'}`;
    case 'too_long':
      return `a run started at ${d.run_started_at ?? '?'} did not end in time`;
    case 'too_fast':
      return `a run ended too fast (${d.duration_ms ?? '?'} ms)`;
  }
}

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
  /** The organization's channels it notifies: null = every one (see `channelsFor` in plan.ts). */
  channels?: string[] | null;
  /** A monitor that went down: why. */
  down?: MonitorDown;
}

/** The execution part of a notification: what its last attempt ended with (the shape a disabling event carries too). */
export type ExecutionSummary = FinalRun;

const LABEL: Record<NotifySourceType, string> = { task: 'Task', schedule: 'Schedule', monitor: 'Monitor', endpoint: 'Endpoint' };

export function eventName(type: NotifySourceType, transition: Transition): NotificationEventName {
  if (type === 'monitor') return transition === 'recovered' ? 'monitor.recovered' : 'monitor.down';
  // Only schedules and endpoints are disabled (a task runs once, a monitor is paused by its owner).
  if (transition === 'disabled') return type === 'endpoint' ? 'endpoint.disabled' : 'schedule.disabled';
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
  if (transition === 'disabled') {
    const detail = execution ? `; the last: ${outcomeText(execution)}` : '';
    return `jetcron: ${what(source)} was disabled after failing again and again${detail}${source.url ? ` (${source.url})` : ''}`;
  }
  if (source.type === 'monitor') {
    if (transition !== 'failed') return `jetcron: ${what(source)} is up again`;
    return `jetcron: ${what(source)} is down${source.down ? `: ${downText(source.down)}` : ''}`;
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
    [source.type]: { id: source.id, name: source.name, ...(source.url !== null ? { url: source.url } : {}), ...(source.down ?? {}) },
    ...(execution ? { execution } : {}),
    ...(chat ? { text: line, content: line } : {}),
  };
}

export function emailMessage(source: NotifySource, transition: Transition, execution: ExecutionSummary | null): { subject: string; text: string } {
  const state = transition === 'disabled'
    ? 'was disabled'
    : source.type === 'monitor'
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
  if (source.down) lines.push(`Down reason: ${source.down.down_reason}`);
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
