import type { Monitor, PingRecord } from '../commands/monitor/types.ts';
import { forwardHealthOf, type Endpoint } from '../commands/endpoint/types.ts';
import { ENDPOINT_HEALTH_TYPES, SCHEDULE_HEALTH_TYPES, type EndpointHealthType, type ScheduleHealthType } from '../commands/health-events.ts';
import type { Channel } from '../commands/channel/types.ts';
import type { Organization } from '../commands/organization/types.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import type { Schedule } from '../commands/schedule/types.ts';
import type { Task } from '../commands/task/types.ts';
import { forTypes, handle, type EventHandlers, type EventOf, type EventType, type JetcronEvent } from '../commands/events.ts';
import type { ProjectionBatch } from './batch.ts';
import type { Row } from './bulk-write.ts';

/** The fields of a task the API returns as its definition (state bookkeeping removed). */
export function taskDoc(task: Task): Record<string, unknown> {
  const { pending_execution: _p, org_id: _o, ...doc } = task;
  return doc;
}

/** A new execution's row: pending, no attempt yet. */
function pendingExecution(
  source: { type: string; id: string; name: string; url: string; org_id: string },
  execution: { id: string; scheduled_for: string; callback_url: string | null; parent_id?: string },
  at: string,
) {
  return {
    id: execution.id,
    org_id: source.org_id,
    source_type: source.type,
    source_id: source.id,
    source_name: source.name,
    url: source.url,
    status: 'pending',
    attempt: 0,
    scheduled_for: execution.scheduled_for,
    callback_url: execution.callback_url,
    script_logs: [],
    response_truncated: false,
    ...(execution.parent_id ? { parent_id: execution.parent_id } : {}),
    created_at: at,
    updated_at: at,
  };
}

function scheduleRow(s: Schedule) {
  const { org_id: _o, next_run_at, disabled_reason, health: _h, ...doc } = s;
  return { id: s.id, org_id: s.org_id, doc, next_run_at, disabled_reason: disabled_reason ?? null, created_at: s.created_at, updated_at: s.updated_at };
}

/** A monitor's row (older shapes arrive upcast: src/commands/upcast.ts). */
function monitorRow(m: Monitor) {
  const {
    org_id, token, status, last_ping_at, next_expected_at, deadline_at: _d, late_at: _l, runs: _r, paused: _p, down_reason, created_at, updated_at, id, ...doc
  } = m;
  return { id, org_id, token, doc, status, last_ping_at, next_expected_at, slug: m.slug, down_reason, created_at, updated_at };
}

/**
 * What a ping or a going down changes of a monitor's row: its state columns. Such an
 * event never changes the definition (`doc`), the token or the creation, so the row is
 * updated, not rewritten (no document encoded per ping, none for Postgres to parse).
 */
function monitorStateRow(m: Monitor) {
  return { id: m.id, status: m.status, last_ping_at: m.last_ping_at, next_expected_at: m.next_expected_at, slug: m.slug, down_reason: m.down_reason, updated_at: m.updated_at };
}

function pingRow(ping: PingRecord, monitorId: string) {
  return { ...ping, monitor_id: monitorId };
}

/** The secret a rotation replaced and `auto_disable_after` live in the events only: the API reads the organization from them. */
function organizationRow(o: Organization) {
  const { previous_webhook_secret: _p, previous_webhook_secret_expires_at: _x, auto_disable_after: _a, ...row } = o;
  return row;
}

function endpointRow(e: Endpoint) {
  const { org_id, slug, paused, sealed_secrets: _s, sealed_verification_secret: _v, forward_health: _f, created_at, updated_at, id, ...doc } = e;
  return { id, org_id, slug, doc, paused, forward_health: forwardHealthOf(e), created_at, updated_at };
}

/** A channel's row: what responses show of it (its sealed secrets stay in the events). */
function channelRow(c: Channel) {
  return { id: c.id, org_id: c.org_id, doc: { kind: c.kind, name: c.name, config: { ...c.config, ...c.secrets }, events: c.events }, created_at: c.created_at, updated_at: c.updated_at };
}

/**
 * A retry's links: the new row names the execution it retries, and that one names its
 * newest retry (events come in log order, so the last retry projected is the newest).
 * An execution no longer there (its source deleted) is not written (`updateRows` skips it).
 */
function retryLink(batch: ProjectionBatch, executionId: string, retryOf: string | undefined): void {
  if (!retryOf) return;
  batch.patchExecution(executionId, { retry_of: retryOf });
  batch.patchExecution(retryOf, { retried_by: executionId });
}

/** An inbound event's deliveries: one pending execution per forward URL, held or not. */
function inboundExecutions(batch: ProjectionBatch, event: InboundEventEvent): void {
  const { event: record, endpoint, executions } = event.data;
  for (const plan of executions) {
    // A debounced event takes over an execution an earlier event of its window made.
    if (plan.replaces) continue;
    const source = { type: 'endpoint', id: endpoint.id, name: endpoint.name, url: plan.url, org_id: event.org_id };
    const execution = { id: plan.execution_id, scheduled_for: plan.scheduled_for, callback_url: null, parent_id: record.id };
    batch.newExecutions.set(plan.execution_id, pendingExecution(source, execution, event.at));
    retryLink(batch, plan.execution_id, plan.retry_of);
  }
}

/** The latest create or update naming a key sets its limits (its pause is its own). */
function flowKeyLimits(batch: ProjectionBatch, task: Task, at: string): void {
  const flow = task.flow_control;
  if (!flow) return;
  batch.patch(batch.flowKeys, `${task.org_id} ${flow.key}`, { org_id: task.org_id, key: flow.key, parallelism: flow.parallelism, rate: flow.rate, period: flow.period, updated_at: at });
}

type Of<T extends EventType> = EventOf<T>;
const nothing = () => {};

const organization = (e: Of<'OrganizationCreated' | 'OrganizationPlanChanged' | 'OrganizationSettingsUpdated' | 'WebhookSecretRotated'>, batch: ProjectionBatch) => {
  batch.orgs.set(e.data.organization.id, organizationRow(e.data.organization));
};
const apiKey = (e: Of<'ApiKeyCreated' | 'ApiKeyRevoked'>, batch: ProjectionBatch) => {
  batch.apiKeys.set(e.data.key.public_id, { ...e.data.key });
};
/**
 * A trigger's run: its row (pending) and its source's `last_execution_id`, both only
 * while the source has a row. A trigger changes nothing of its source's definition, and
 * one decided outside the source's subject (a bulk job's group) may carry an older state
 * than the row's, or come after the source's delete: the source's row is never written
 * from it.
 */
function triggeredRun(batch: ProjectionBatch, table: 'tasks' | 'schedules', sourceId: string, row: Row, retryOf: string | undefined): void {
  const id = row.id as string;
  batch.newExecutions.set(id, row);
  batch.triggeredRuns.add(id);
  const inBatch = batch[table].get(sourceId);
  if (inBatch) inBatch.last_execution_id = id;
  else batch.lastRuns[table].set(sourceId, id);
  retryLink(batch, id, retryOf);
}

const taskCreated = (e: Of<'TaskCreated'>, batch: ProjectionBatch) => {
  const { task, execution } = e.data;
  batch.patch(batch.tasks, task.id, {
    id: task.id,
    org_id: task.org_id,
    doc: taskDoc(task),
    lane: task.lane,
    last_execution_id: execution.id,
    created_at: task.created_at,
    updated_at: task.updated_at,
  });
  batch.newExecutions.set(execution.id, pendingExecution({ ...task, type: 'task' }, execution, e.at));
  batch.createdTasks.add(task.id);
  flowKeyLimits(batch, task, e.at);
};
const schedule = (e: Of<'ScheduleCreated' | 'ScheduleUpdated' | 'ScheduleTicksMissed' | ScheduleHealthType>, batch: ProjectionBatch) => {
  batch.patch(batch.schedules, e.data.schedule.id, scheduleRow(e.data.schedule));
};
const scheduleTicked = (e: Of<'ScheduleTicked'>, batch: ProjectionBatch) => {
  const { schedule: s, execution } = e.data;
  batch.patch(batch.schedules, s.id, { ...scheduleRow(s), last_execution_id: execution.id });
  batch.newExecutions.set(execution.id, pendingExecution({ ...s, type: 'schedule' }, execution, e.at));
};
const monitor = (e: Of<'MonitorCreated' | 'MonitorUpdated' | 'MonitorPaused' | 'MonitorResumed' | 'MonitorPinged' | 'MonitorWentDown'>, batch: ProjectionBatch) => {
  const m = e.data.monitor;
  const stateOnly = e.type === 'MonitorPinged' || e.type === 'MonitorWentDown';
  batch.patch(batch.monitors, m.id, stateOnly ? monitorStateRow(m) : monitorRow(m));
  const ping = 'ping' in e.data ? e.data.ping : undefined;
  if (ping) batch.pings.set(ping.id, pingRow(ping, m.id));
};
const endpoint = (e: Of<'EndpointCreated' | 'EndpointUpdated' | 'EndpointPaused' | 'EndpointResumed' | EndpointHealthType>, batch: ProjectionBatch) => {
  batch.endpoints.set(e.data.endpoint.id, endpointRow(e.data.endpoint));
};
/** A job's row: the state columns from every event, the set from its acceptance (a later event's row merges over it). */
const job = (e: Of<'RetryJobAccepted' | 'RetryJobStepped' | 'RetryJobCancelled'>, batch: ProjectionBatch) => {
  const j = e.data.job;
  batch.patch(batch.jobs, j.id, {
    id: j.id, org_id: j.org_id, kind: j.kind, status: j.status, filter: j.filter, total: j.total, done: j.done, skipped: j.skipped,
    ...(e.type === 'RetryJobAccepted' ? { execution_ids: e.data.execution_ids, endpoint_id: j.endpoint_id ?? null, forward_urls: j.forward_urls ?? null } : {}),
    created_at: j.created_at, finished_at: j.finished_at, updated_at: e.at,
  });
};
const flowKey = (e: Of<'FlowControlPaused' | 'FlowControlResumed'>, batch: ProjectionBatch) => {
  batch.patch(batch.flowKeys, `${e.org_id} ${e.data.key}`, { org_id: e.org_id, key: e.data.key, paused: e.type === 'FlowControlPaused', updated_at: e.at });
};

/** What each event changes in the read models (the batch merges the changes per row). */
const projections: EventHandlers<void, [ProjectionBatch]> = {
  ...forTypes(['OrganizationCreated', 'OrganizationPlanChanged', 'OrganizationSettingsUpdated', 'WebhookSecretRotated'], organization),
  ...forTypes(['ApiKeyCreated', 'ApiKeyRevoked'], apiKey),
  ...forTypes(['RetryJobAccepted', 'RetryJobStepped', 'RetryJobCancelled'], job),
  TaskCreated: taskCreated,
  TaskTriggered: (e, batch) => triggeredRun(batch, 'tasks', e.data.task.id, pendingExecution({ ...e.data.task, type: 'task' }, e.data.execution, e.at), e.data.retry_of),
  TaskUpdated: (e, batch) => {
    const { task } = e.data;
    flowKeyLimits(batch, task, e.at);
    batch.patch(batch.tasks, task.id, { id: task.id, org_id: task.org_id, doc: taskDoc(task), lane: task.lane, created_at: task.created_at, updated_at: task.updated_at });
    // A new delay/run_at moves the not-yet-run execution; the status guard leaves a
    // run that already started alone.
    if (task.pending_execution && (e.data.changed.includes('delay') || e.data.changed.includes('run_at'))) {
      const id = task.pending_execution.id;
      const created = batch.newExecutions.get(id);
      if (created) created.scheduled_for = task.pending_execution.scheduled_for;
      batch.reschedules.set(id, { scheduled_for: task.pending_execution.scheduled_for, at: e.at });
    }
  },
  TaskDeleted: (e, batch) => {
    batch.tasks.delete(e.data.task.id);
    batch.deletedTasks.add(e.data.task.id);
  },
  TaskCancelled: (e, batch) => {
    batch.cancelledTasks.set(e.data.task.id, e.at);
  },
  AttemptStarted: (e, batch) => {
    const d = e.data;
    batch.patchExecution(d.execution_id, { status: 'running', attempt: d.attempt, started_at: d.started_at, updated_at: e.at });
  },
  AttemptFinished: (e, batch) => {
    const d = e.data;
    // A fenced owner's late result: history in the log; its adopted copy, if any, is the execution's.
    if (d.late) return;
    const status = d.final ? d.status : 'pending';
    batch.patchExecution(d.execution_id, {
      status,
      status_code: d.status_code,
      error_message: d.error_message,
      attempt: d.attempt,
      duration_ms: d.duration_ms,
      started_at: d.started_at,
      finished_at: d.finished_at,
      ...(d.next_attempt_at ? { scheduled_for: d.next_attempt_at } : {}),
      request: d.request,
      response_body: d.response_body,
      response_body_encoding: d.response_body_encoding ?? null,
      response_truncated: d.response_truncated,
      response_headers: d.response_headers,
      script_logs: d.script_logs,
      updated_at: e.at,
    });
    const attempt = {
      execution_id: d.execution_id,
      attempt: d.attempt,
      status: d.status,
      status_code: d.status_code,
      started_at: d.started_at,
      finished_at: d.finished_at,
      duration_ms: d.duration_ms,
      error_message: d.error_message,
    };
    // A retry follows: the execution row moves on, the attempt keeps a row. The last
    // attempt stays in the execution row alone (see attempt-rows.ts).
    if (!d.final) batch.attempts.set(`${d.execution_id}:${d.attempt}`, attempt);
    else batch.lastAttempts.set(d.execution_id, attempt);
  },
  // The host is blocked: the attempt waits, pending, until the block ends.
  AttemptDeferred: (e, batch) => {
    batch.patchExecution(e.data.execution_id, { status: 'pending', scheduled_for: e.data.scheduled_for, updated_at: e.at });
  },
  ExecutionCancelled: (e, batch) => {
    // A cancel recorded after the last attempt ended takes the row's status: that
    // attempt then needs a row of its own.
    const id = e.data.execution_id;
    const last = batch.lastAttempts.get(id);
    if (last) batch.attempts.set(`${id}:${last.attempt}`, last);
    else batch.cancelledExecutions.add(id);
    batch.patchExecution(id, { status: 'cancelled', updated_at: e.at });
  },
  // A completion callback's deliveries are in the log only; no read model keeps them.
  CallbackAttempted: nothing,
  ...forTypes(['ScheduleCreated', 'ScheduleUpdated', 'ScheduleTicksMissed', ...SCHEDULE_HEALTH_TYPES], schedule),
  ScheduleDeleted: (e, batch) => {
    batch.schedules.delete(e.data.schedule.id);
    batch.deletedSchedules.add(e.data.schedule.id);
  },
  ScheduleTicked: scheduleTicked,
  ScheduleTriggered: (e, batch) => triggeredRun(batch, 'schedules', e.data.schedule.id, pendingExecution({ ...e.data.schedule, type: 'schedule' }, e.data.execution, e.at), e.data.retry_of),
  ...forTypes(['MonitorCreated', 'MonitorUpdated', 'MonitorPaused', 'MonitorResumed', 'MonitorPinged', 'MonitorWentDown'], monitor),
  MonitorDeleted: (e, batch) => {
    batch.monitors.delete(e.data.monitor.id);
    batch.deletedMonitors.add(e.data.monitor.id);
  },
  ...forTypes(['EndpointCreated', 'EndpointUpdated', 'EndpointPaused', 'EndpointResumed', ...ENDPOINT_HEALTH_TYPES], endpoint),
  EndpointDeleted: (e, batch) => {
    batch.endpoints.delete(e.data.endpoint.id);
    batch.deletedEndpoints.add(e.data.endpoint.id);
  },
  InboundEventReceived: (e, batch) => {
    const r = e.data.event;
    batch.inboundEvents.set(r.id, {
      id: r.id, org_id: e.org_id, endpoint_id: r.endpoint_id, method: r.method, path: r.path, query: r.query,
      source_ip: r.source_ip, received_at: r.received_at, body_size: r.body_size, inbound_seq: r.inbound_seq,
      outcome: r.outcome, execution_id: e.data.executions[0]?.execution_id ?? null,
      script_logs: r.script_logs ?? [], error_message: r.error_message ?? null,
    });
    inboundExecutions(batch, e);
  },
  InboundEventReplayed: (e, batch) => inboundExecutions(batch, e),
  // Debounce, batch: the window and the batch are claims their deciders (and the
  // inbound router) read back from their own subjects; the tasks they make arrive as
  // TaskCreated/TaskUpdated, an endpoint window's deliveries as InboundEventReceived.
  ...forTypes(['DebounceWindowOpened', 'InboundDebounceOpened', 'BatchAccepted'], nothing),
  // The notifier's delivery records: no read model lists them; one to a channel is its `last_delivery`.
  ...forTypes(['NotificationSent', 'NotificationFailed'], (e: Of<'NotificationSent' | 'NotificationFailed'>, batch: ProjectionBatch) => {
    const d = e.data;
    if (d.channel !== 'channel' || !d.channel_id) return;
    batch.channelDelivery(d.channel_id, { at: e.at, ok: e.type === 'NotificationSent', status_code: d.status_code, error: d.error_message });
  }),
  ChannelTested: (e, batch) => batch.channelDelivery(e.data.channel.id, e.data.delivery),
  ...forTypes(['ChannelCreated', 'ChannelUpdated'], (e: Of<'ChannelCreated' | 'ChannelUpdated'>, batch: ProjectionBatch) => {
    batch.deletedChannels.delete(e.data.channel.id);
    batch.channels.set(e.data.channel.id, channelRow(e.data.channel));
  }),
  ChannelDeleted: (e, batch) => {
    batch.channels.delete(e.data.channel.id);
    batch.channelDeliveries.delete(e.data.channel.id);
    batch.deletedChannels.add(e.data.channel.id);
  },
  ...forTypes(['FlowControlPaused', 'FlowControlResumed'], flowKey),
  // Plan-limit reservations (read back by the quota decider) and partition claims (by the owners).
  ...forTypes(['QuotaReserved', 'PartitionClaimed', 'ExecutionHandedToKey'], nothing),
  // The monitor as its row already has it (an owner's anchor for takeovers): no row changes.
  MonitorRestated: nothing,
};

/** Every event type the read models know of: the handler map is complete by type (the catalogue's test compares). */
export const PROJECTED_EVENT_TYPES: readonly string[] = Object.keys(projections);

export function applyEvent(batch: ProjectionBatch, event: JetcronEvent): void {
  batch.size++;
  handle(projections, event, batch);
}
