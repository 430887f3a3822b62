import { ENDPOINT_HEALTH_TYPES, SCHEDULE_HEALTH_TYPES, type EndpointHealthType, type ScheduleHealthType } from '../commands/health-events.ts';
import type { ExecutionSource, ExecutionStatus, SourceType } from '../commands/execution/types.ts';
import type { MonitorStatus } from '../commands/monitor/types.ts';
import type { InboundOutcome } from '../commands/inbound-event/types.ts';
import { forTypes, handle, type EventHandlers, type EventOf, type EventType, type JetcronEvent } from '../commands/events.ts';

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

type Base = Pick<LiveMessage, 'type' | 'at'>;
type Message<T extends EventType> = (e: EventOf<T>, base: Base) => LiveMessage | null;

const organization: Message<'OrganizationCreated' | 'OrganizationPlanChanged' | 'OrganizationSettingsUpdated' | 'WebhookSecretRotated'> = (e, base) =>
  ({ ...base, kind: 'organization', id: e.data.organization.id });
const apiKey: Message<'ApiKeyCreated' | 'ApiKeyRevoked'> = (e, base) => ({ ...base, kind: 'organization', id: e.data.key.org_id });
const taskRun: Message<'TaskCreated' | 'TaskTriggered'> = (e, base) =>
  ({ ...base, kind: 'task', id: e.data.task.id, task_id: e.data.task.id, execution_id: e.data.execution.id, status: 'pending' });
const task: Message<'TaskUpdated' | 'TaskDeleted' | 'TaskCancelled'> = (e, base) => ({ ...base, kind: 'task', id: e.data.task.id, task_id: e.data.task.id });
const execution = (status: ExecutionStatus): Message<'AttemptStarted' | 'AttemptDeferred' | 'ExecutionCancelled'> => (e, base) =>
  ({ ...base, kind: 'execution', id: e.data.execution_id, execution_id: e.data.execution_id, ...sourceId(e.data.source), status });
const schedule: Message<'ScheduleCreated' | 'ScheduleUpdated' | 'ScheduleDeleted' | 'ScheduleTicksMissed' | ScheduleHealthType> = (e, base) =>
  ({ ...base, kind: 'schedule', id: e.data.schedule.id, schedule_id: e.data.schedule.id });
const scheduleRun: Message<'ScheduleTriggered' | 'ScheduleTicked'> = (e, base) =>
  ({ ...base, kind: 'schedule', id: e.data.schedule.id, schedule_id: e.data.schedule.id, execution_id: e.data.execution.id, status: 'pending' });
const monitor: Message<'MonitorCreated' | 'MonitorUpdated' | 'MonitorDeleted' | 'MonitorPaused' | 'MonitorResumed' | 'MonitorPinged' | 'MonitorWentDown'> = (e, base) =>
  ({ ...base, kind: 'monitor', id: e.data.monitor.id, monitor_id: e.data.monitor.id, monitor_status: e.data.monitor.status });
const endpoint: Message<'EndpointCreated' | 'EndpointUpdated' | 'EndpointDeleted' | 'EndpointPaused' | 'EndpointResumed' | EndpointHealthType> = (e, base) =>
  ({ ...base, kind: 'endpoint', id: e.data.endpoint.id, endpoint_id: e.data.endpoint.id });
const inboundEvent: Message<'InboundEventReceived' | 'InboundEventReplayed'> = (e, base) => {
  const first = e.data.executions[0];
  return {
    ...base, kind: 'inbound_event', id: e.data.event.id, endpoint_id: e.data.event.endpoint_id, outcome: e.data.event.outcome,
    ...(first ? { execution_id: first.execution_id } : {}),
  };
};
// Announced by the events that follow them (each task's TaskCreated, the inbound
// event's InboundEventReceived), or bookkeeping no page shows.
const none = () => null;

const messages: EventHandlers<LiveMessage | null, [Base]> = {
  ...forTypes(['OrganizationCreated', 'OrganizationPlanChanged', 'OrganizationSettingsUpdated', 'WebhookSecretRotated'], organization),
  ...forTypes(['ApiKeyCreated', 'ApiKeyRevoked'], apiKey),
  ...forTypes(['TaskCreated', 'TaskTriggered'], taskRun),
  ...forTypes(['TaskUpdated', 'TaskDeleted', 'TaskCancelled'], task),
  AttemptStarted: execution('running'),
  // A fenced owner's late result is history only (its adopted copy, if any, is announced).
  AttemptFinished: (e, base) => (e.data.late ? null : {
    ...base, kind: 'execution', id: e.data.execution_id, execution_id: e.data.execution_id, ...sourceId(e.data.source),
    // Another attempt follows: the execution waits for it, as the read model shows it.
    status: e.data.final ? e.data.status : 'pending',
  }),
  AttemptDeferred: execution('pending'),
  ExecutionCancelled: execution('cancelled'),
  CallbackAttempted: (e, base) => ({ ...base, kind: 'execution', id: e.data.execution_id, execution_id: e.data.execution_id }),
  ...forTypes(['ScheduleCreated', 'ScheduleUpdated', 'ScheduleDeleted', 'ScheduleTicksMissed', ...SCHEDULE_HEALTH_TYPES], schedule),
  ...forTypes(['ScheduleTriggered', 'ScheduleTicked'], scheduleRun),
  ...forTypes(['MonitorCreated', 'MonitorUpdated', 'MonitorDeleted', 'MonitorPaused', 'MonitorResumed', 'MonitorPinged', 'MonitorWentDown'], monitor),
  ...forTypes(['EndpointCreated', 'EndpointUpdated', 'EndpointDeleted', 'EndpointPaused', 'EndpointResumed', ...ENDPOINT_HEALTH_TYPES], endpoint),
  ...forTypes(['InboundEventReceived', 'InboundEventReplayed'], inboundEvent),
  ...forTypes(['BatchAccepted', 'DebounceWindowOpened', 'InboundDebounceOpened', 'FlowControlPaused', 'FlowControlResumed', 'QuotaReserved', 'PartitionClaimed', 'ExecutionHandedToKey', 'NotificationSent', 'NotificationFailed', 'MonitorRestated',
    // Channels: their page reads them again after each action of its own.
    'ChannelCreated', 'ChannelUpdated', 'ChannelDeleted', 'ChannelTested',
    // Bulk retry jobs: their page polls the job (its retries show as executions' own events).
    'RetryJobAccepted', 'RetryJobStepped', 'RetryJobCancelled'], none),
};

/** The live message of an event, or null for events no list shows (bookkeeping, and events another one already announces). */
export function liveMessage(event: JetcronEvent): LiveMessage | null {
  return handle(messages, event, { type: event.type, at: event.at });
}

/** The message as one server-sent event: `event: <kind>`, `data: <json>` (JSON text holds no line break). */
export function sseFrame(message: LiveMessage): string {
  return `event: ${message.kind}\ndata: ${JSON.stringify(message)}\n\n`;
}
