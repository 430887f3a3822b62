import type { ExecutionSource, ExecutionStatus, SourceType } from '../commands/execution/types.ts';
import type { MonitorStatus } from '../commands/monitor/types.ts';
import type { InboundOutcome } from '../commands/inbound-event/types.ts';
import type { EventType, JetcronEvent } from '../events/types.ts';
import { unreachable } from '../lib/unreachable.ts';

export const LIVE_KINDS = ['task', 'schedule', 'monitor', 'endpoint', 'execution', 'inbound_event', 'organization'] as const;
export type LiveKind = (typeof LIVE_KINDS)[number];

/**
 * One message of the live feed: which resource an event changed and the state it
 * decided, never a body, header, URL or secret. The console fetches the resource
 * through the API when it needs more.
 */
export interface LiveMessage {
  type: EventType;
  kind: LiveKind;
  /** The resource's id: the kind's own (`tsk_…`, `exe_…`, `evt_…`, `org_…`, …). */
  id: string;
  execution_id?: string;
  task_id?: string;
  schedule_id?: string;
  endpoint_id?: string;
  monitor_id?: string;
  /** The execution's status, when the event decides one. */
  status?: ExecutionStatus;
  /** A monitor's status after the event. */
  monitor_status?: MonitorStatus;
  /** How an inbound event was routed (`forwarding`, `filtered`, …). */
  outcome?: InboundOutcome;
  /** When the event happened (ISO 8601). */
  at: string;
}

type SourceField = 'task_id' | 'schedule_id' | 'endpoint_id' | 'monitor_id';
const SOURCE_FIELD: Record<SourceType, SourceField> = { task: 'task_id', schedule: 'schedule_id', endpoint: 'endpoint_id', monitor: 'monitor_id' };
const sourceId = (source: ExecutionSource): Partial<Pick<LiveMessage, SourceField>> => ({ [SOURCE_FIELD[source.type]]: source.id });

/** The live message of an event, or null for events no list shows (bookkeeping, and events another one already announces). */
export function liveMessage(event: JetcronEvent): LiveMessage | null {
  const base = { type: event.type, at: event.at };
  switch (event.type) {
    case 'OrganizationCreated':
    case 'OrganizationPlanChanged':
    case 'OrganizationSettingsUpdated':
    case 'WebhookSecretRotated':
      return { ...base, kind: 'organization', id: event.data.organization.id };
    case 'ApiKeyCreated':
    case 'ApiKeyRevoked':
      return { ...base, kind: 'organization', id: event.data.key.org_id };
    case 'TaskCreated':
    case 'TaskTriggered':
      return { ...base, kind: 'task', id: event.data.task.id, task_id: event.data.task.id, execution_id: event.data.execution.id, status: 'pending' };
    case 'TaskUpdated':
    case 'TaskDeleted':
    case 'TaskCancelled':
      return { ...base, kind: 'task', id: event.data.task.id, task_id: event.data.task.id };
    case 'AttemptStarted':
      return { ...base, kind: 'execution', id: event.data.execution_id, execution_id: event.data.execution_id, ...sourceId(event.data.source), status: 'running' };
    case 'AttemptFinished':
      return {
        ...base, kind: 'execution', id: event.data.execution_id, execution_id: event.data.execution_id, ...sourceId(event.data.source),
        // Another attempt follows: the execution waits for it, as the read model shows it.
        status: event.data.next_attempt_at ? 'pending' : event.data.status,
      };
    case 'AttemptDeferred':
      return { ...base, kind: 'execution', id: event.data.execution_id, execution_id: event.data.execution_id, ...sourceId(event.data.source), status: 'pending' };
    case 'ExecutionCancelled':
      return { ...base, kind: 'execution', id: event.data.execution_id, execution_id: event.data.execution_id, ...sourceId(event.data.source), status: 'cancelled' };
    case 'CallbackAttempted':
      return { ...base, kind: 'execution', id: event.data.execution_id, execution_id: event.data.execution_id };
    case 'ScheduleCreated':
    case 'ScheduleUpdated':
    case 'ScheduleDeleted':
      return { ...base, kind: 'schedule', id: event.data.schedule.id, schedule_id: event.data.schedule.id };
    case 'ScheduleTriggered':
    case 'ScheduleTicked':
      return { ...base, kind: 'schedule', id: event.data.schedule.id, schedule_id: event.data.schedule.id, execution_id: event.data.execution.id, status: 'pending' };
    case 'MonitorCreated':
    case 'MonitorUpdated':
    case 'MonitorDeleted':
    case 'MonitorPaused':
    case 'MonitorResumed':
    case 'MonitorPinged':
    case 'MonitorWentDown':
      return { ...base, kind: 'monitor', id: event.data.monitor.id, monitor_id: event.data.monitor.id, monitor_status: event.data.monitor.status };
    case 'EndpointCreated':
    case 'EndpointUpdated':
    case 'EndpointDeleted':
    case 'EndpointPaused':
    case 'EndpointResumed':
      return { ...base, kind: 'endpoint', id: event.data.endpoint.id, endpoint_id: event.data.endpoint.id };
    case 'InboundEventReceived':
    case 'InboundEventReplayed': {
      const first = event.data.executions[0];
      return {
        ...base, kind: 'inbound_event', id: event.data.event.id, endpoint_id: event.data.event.endpoint_id, outcome: event.data.event.outcome,
        ...(first ? { execution_id: first.execution_id } : {}),
      };
    }
    // Announced by the events that follow them (each task's TaskCreated, the inbound
    // event's InboundEventReceived), or bookkeeping no page shows.
    case 'BatchAccepted':
    case 'DebounceWindowOpened':
    case 'InboundDebounceOpened':
    case 'FlowControlPaused':
    case 'FlowControlResumed':
    case 'QuotaReserved':
    case 'PartitionClaimed':
    case 'NotificationSent':
    case 'NotificationFailed':
      return null;
    default:
      return unreachable(event);
  }
}

/** The message as one server-sent event: `event: <kind>`, `data: <json>` (JSON text holds no line break). */
export function sseFrame(message: LiveMessage): string {
  return `event: ${message.kind}\ndata: ${JSON.stringify(message)}\n\n`;
}
