import { type KV_CHECKPOINT_READERS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { AttemptResult, ExecutionEvent } from '../commands/execution/types.ts';
import { executionCancelled } from '../commands/execution/ending.ts';
import { TASK_EVENT_TYPES, type Task, type TaskEvent } from '../commands/task/types.ts';
import { MONITOR_EVENT_TYPES } from '../commands/monitor/types.ts';
import { evolveTask } from '../commands/task/decide.ts';
import type { EventStore } from '../events/store.ts';
import { forTypes, handle as handleEvent, type EventHandlers, type EventOf, type EventType, type JetcronEvent } from '../events/types.ts';
import type { StoredEvent } from '../events/envelope.ts';
import type { AttemptJob, CallbackJob, Job } from '../commands/execution/job.ts';
import type { Clock } from '../lib/clock.ts';
import { unreachable } from '../lib/unreachable.ts';
import type { Nats } from '../nats/connection.ts';
import { keyedEventConsumer, startConsumers } from '../nats/consumer-kit.ts';
import { materializeBatch } from '../commands/batch/handlers.ts';
import { afterAttempt, needsRetryPlan, nextCallback, type RetryPlan } from '../commands/execution/decide.ts';
import { evolveSchedule } from '../commands/schedule/decide.ts';
import { scheduleSubject } from '../commands/schedule/handlers.ts';
import type { Schedule, ScheduleEvent } from '../commands/schedule/types.ts';
import { scheduleAttemptJob, tickJob } from '../commands/execution/schedule-jobs.ts';
import { taskAttemptJob } from '../commands/execution/task-jobs.ts';
import type { Lanes } from './lanes.ts';
import type { TimerStore } from './timer-store.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { evolveEndpoint } from '../commands/endpoint/decide.ts';
import type { EndpointEvent } from '../commands/endpoint/types.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import { endpointAttemptJob } from '../commands/execution/endpoint-jobs.ts';
import type { Held } from './held.ts';
import { lastTaskEvent } from '../commands/task/load.ts';

export const CHECKPOINT_KEY: keyof typeof KV_CHECKPOINT_READERS = 'translator';
const CHECKPOINT_EVERY_MS = 250;

export interface TranslatorDeps {
  nats: Nats;
  store: EventStore;
  timers: TimerStore;
  lanes: Lanes;
  held: Held;
  /** Puts a due job to work: DISPATCH, or its lane's queue for a lane's first attempt. */
  start: (job: Job) => Promise<void>;
  clock: Clock;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
  /** Tasks and endpoint deliveries are the partition owners' (JETCRON_DISPATCH=owners): their events and results are not this translator's. */
  ownersHaveTasks?: boolean;
}

/**
 * What the partition owners do instead of the translator when they own tasks: a task's
 * events, an inbound event's deliveries, and everything in their commits. (An
 * endpoint's resume still releases what HELD kept from before the owners; its delete
 * still purges its stored requests and timers.)
 */
function ownersWork(event: JetcronEvent, subject: string): boolean {
  if (TASK_EVENT_TYPES.has(event.type) || event.type === 'InboundEventReceived' || event.type === 'InboundEventReplayed' || subject.startsWith('evt.partition.')) return true;
  // A task's or an endpoint's result on its execution's subject (a fenced owner's late
  // result, or DISPATCH's from before the switch): the owners settle it, retries and callbacks included.
  const source = event.type === 'CallbackAttempted' ? event.data.job.source : RESULT_TYPES.has(event.type) ? (event as Exclude<ExecutionEvent, { type: 'CallbackAttempted' }>).data.source : null;
  return source?.type === 'task' || source?.type === 'endpoint';
}

const RESULT_TYPES: ReadonlySet<string> = new Set<ExecutionEvent['type']>(['AttemptStarted', 'AttemptFinished', 'AttemptDeferred', 'ExecutionCancelled']);

/**
 * Turns events into work: a job on DISPATCH when it is due now, a timer in TIMERS
 * when it is due later. Stateless apart from its checkpoint; every write is keyed
 * (timer subjects hold one value, DISPATCH dedupes on job ids), so replaying the
 * few events after the last checkpoint changes nothing.
 */
export function createTranslator(deps: TranslatorDeps) {
  const dispatchNow = deps.start;

  const schedule = async (job: Job, dueAt: number, enabled = true) => {
    if (!enabled) return deps.timers.put(job, { state: 'paused', job });
    if (dueAt <= deps.clock.now()) return dispatchNow(job);
    return deps.timers.put(job, { state: 'armed', due_at: dueAt, job });
  };

  async function currentTask(orgId: string, taskId: string): Promise<Task | null> {
    const last = await lastTaskEvent(deps.store, orgId, taskId);
    return last ? evolveTask(null, last) : null;
  }

  async function onTaskChanged(task: Task) {
    // Re-point every pending timer of the task at its new definition.
    for (const timer of await deps.timers.listSource(task.org_id, task.id)) {
      const old = timer.value.job;
      if (old.kind !== 'attempt') continue;
      const planned = task.pending_execution?.id === old.execution_id && old.attempt === 1
        ? task.pending_execution
        : { id: old.execution_id, scheduled_for: old.scheduled_for, callback_url: old.push_callback_url };
      const job: AttemptJob = taskAttemptJob(task, planned, old.attempt);
      const dueAt = Date.parse(job.scheduled_for);
      const value = task.enabled ? { state: 'armed' as const, due_at: dueAt, job } : { state: 'paused' as const, job };
      await deps.timers.put(job, value, timer.seq).catch((err: unknown) => {
        // Lost the race: the timer fired or changed meanwhile; the run it started keeps the
        // old definition. Anything else is unknown and propagates, so the update is retried.
        if (!isWrongLastSequence(err)) throw err;
      });
    }
  }

  /**
   * Endpoints' pause state and the sequence of their last event: read once, then kept
   * by the endpoint's own events as its chain handles them (a later sequence wins),
   * so a delivery costs no read. Emptied whenever the lease is taken again.
   */
  const endpoints = new Map<string, { paused: boolean; seq: number } | null>();
  async function endpointState(orgId: string, endpointId: string) {
    if (endpoints.has(endpointId)) return endpoints.get(endpointId)!;
    const last = await deps.store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, endpointId));
    const endpoint = last ? evolveEndpoint(null, last.event) : null;
    const state = endpoint ? { paused: endpoint.paused, seq: last!.seq } : null;
    if (!endpoints.has(endpointId)) endpoints.set(endpointId, state);
    return endpoints.get(endpointId)!;
  }
  function learnEndpoint(event: EndpointEvent, seq: number) {
    const id = event.data.endpoint.id;
    const known = endpoints.get(id);
    if (known === undefined || (known && known.seq >= seq)) return;
    endpoints.set(id, event.type === 'EndpointDeleted' ? null : { paused: event.data.endpoint.paused, seq });
  }

  /**
   * An inbound event's deliveries go to work, or wait in HELD. The endpoint's events
   * and its deliveries run on one chain in stream order, but the endpoint is read as
   * it is now, which may be past this delivery: a translator behind the log can find
   * it resumed while the resume, still ahead in the chain, has yet to release the
   * older held ones. So a delivery is held when the endpoint is paused, or when it
   * changed after this delivery and HELD still has some of its jobs (a resume is
   * pending and will send them all in arrival order).
   */
  async function onInboundDeliveries(event: InboundEventEvent, originSeq: number) {
    const { event: record, endpoint, executions } = event.data;
    if (!executions.length) return;
    const state = await endpointState(event.org_id, endpoint.id);
    if (!state) return; // deleted: its deliveries were cancelled with it
    const hold = state.paused || (state.seq > originSeq && (await deps.held.waiting(event.org_id, endpoint.id)));
    const ref = { event_id: record.id, seq: record.inbound_seq, origin_seq: originSeq };
    for (const plan of executions) {
      const job = endpointAttemptJob(event.org_id, endpoint, ref, plan, 1, plan.scheduled_for, record.script_logs);
      if (hold) await deps.held.hold(job);
      // Due now, or at a debounce window's end (a later event of the window puts its job in place of the earlier one's).
      else await schedule(job, Date.parse(plan.scheduled_for));
    }
  }

  /** An endpoint execution's next attempt, rebuilt from the event that planned it. */
  async function endpointRetry(orgId: string, d: AttemptResult): Promise<AttemptJob | null> {
    if (!d.inbound || !(await endpointState(orgId, d.source.id))) return null;
    // The router's commits hold many inbound events: the one that planned this execution.
    const planned = (e: InboundEventEvent) => !!e.data.executions?.some((p) => p.execution_id === d.execution_id);
    const origin = await deps.store.at<InboundEventEvent>(d.inbound.origin_seq, planned);
    const plan = origin?.event.data.executions?.find((p) => p.execution_id === d.execution_id);
    if (!origin || !plan) return null;
    return endpointAttemptJob(orgId, origin.event.data.endpoint, d.inbound, plan, d.attempt + 1, d.next_attempt_at!, origin.event.data.event.script_logs);
  }

  /** The next attempt of a task's or an endpoint's execution, or null when its source is gone. */
  async function retryOf(orgId: string, d: AttemptResult): Promise<{ job: AttemptJob; enabled: boolean } | null> {
    if (d.source.type === 'endpoint') {
      const job = await endpointRetry(orgId, d);
      return job && { job, enabled: true };
    }
    const task = await currentTask(orgId, d.source.id);
    if (!task) return null;
    const planned = { id: d.execution_id, scheduled_for: d.next_attempt_at!, callback_url: d.push_callback_url };
    return { job: taskAttemptJob(task, planned, d.attempt + 1), enabled: task.enabled };
  }

  /** A schedule's timer for its next tick; none when it has no next run. */
  async function armTick(s: Schedule): Promise<void> {
    if (!s.next_run_at) return;
    const job = tickJob(s, s.next_run_at);
    await deps.timers.put(job, { state: 'armed', due_at: Date.parse(s.next_run_at), job });
  }

  /**
   * A cancelled task keeps its history, so each execution still waiting on a timer (a
   * delayed first attempt, a retry) is recorded as cancelled before the timers go; one
   * that holds its lane frees it. Executions queued in a lane or already due are
   * cancelled when their turn comes (lanes.ts, the dispatcher), a running one when its
   * attempt ends (onAttemptFinished). Event ids are per execution, so a repeat is one.
   */
  async function onTaskCancelled(orgId: string, taskId: string) {
    for (const timer of await deps.timers.listSource(orgId, taskId)) {
      const job = timer.value.job;
      if (job.kind !== 'attempt') continue;
      const cancelled = executionCancelled(orgId, { execution_id: job.execution_id, source: job.source, reason: 'task cancelled', lane: job.lane }, deps.clock.now());
      await deps.store.append(SUBJECTS.execution(orgId, job.execution_id), cancelled);
    }
    await deps.timers.purgeSource(orgId, taskId);
  }

  /** The next attempt as the execution's source says it now; null when the source is gone. */
  async function retryPlan(orgId: string, d: AttemptResult): Promise<RetryPlan | null> {
    if (d.source.type === 'schedule') {
      const last = await deps.store.last<ScheduleEvent>(scheduleSubject(orgId, d.source.id));
      const s = last ? evolveSchedule(null, last.event) : null;
      return s && { job: scheduleAttemptJob(s, { id: d.execution_id, scheduled_for: d.next_attempt_at!, callback_url: d.push_callback_url }, d.attempt + 1), enabled: s.enabled };
    }
    return d.source.type === 'task' || d.source.type === 'endpoint' ? retryOf(orgId, d) : null;
  }

  async function onAttemptFinished(orgId: string, d: AttemptResult) {
    const next = afterAttempt(orgId, d, needsRetryPlan(d) ? await retryPlan(orgId, d) : null, deps.clock.now());
    switch (next.kind) {
      case 'retry':
        return schedule(next.job, next.dueAt, next.enabled);
      case 'cancel':
        await deps.store.append(SUBJECTS.execution(orgId, d.execution_id), next.event);
        return;
      case 'end':
        if (next.releaseLane) await deps.lanes.release(orgId, next.releaseLane, d.execution_id);
        if (next.callback) await dispatchNow(next.callback);
        return;
      default:
        return unreachable(next);
    }
  }

  type Work<T extends EventType> = (e: EventOf<T>, seq: number) => Promise<void>;
  const nothing = async () => {};
  const inboundDeliveries: Work<'InboundEventReceived' | 'InboundEventReplayed'> = (e, seq) => onInboundDeliveries(e, seq);
  const scheduleChanged: Work<'ScheduleCreated' | 'ScheduleUpdated'> = async (e) => {
    const s = e.data.schedule;
    if (s.next_run_at) await armTick(s);
    else await deps.timers.purgeSource(s.org_id, s.id);
  };

  /** What each event puts to work: timers armed or purged, jobs dispatched, lanes released. */
  const work: EventHandlers<Promise<void>, [number]> = {
    ...forTypes(['InboundEventReceived', 'InboundEventReplayed'], inboundDeliveries),
    EndpointResumed: async (e) => {
      await deps.held.release(e.org_id, e.data.endpoint.id, dispatchNow);
    },
    EndpointDeleted: async (e) => {
      const id = e.data.endpoint.id;
      // Its inbound events go with it (the spec); pending deliveries find nothing to send and are cancelled.
      await Promise.all([
        deps.timers.purgeSource(e.org_id, id),
        deps.held.purge(e.org_id, id),
        deps.nats.jsm.streams.purge(STREAMS.inbound.name, { filter: SUBJECTS.inbound(e.org_id, id) }),
      ]);
    },
    // Its pause state is learnt by `handle` (learnEndpoint) and read by its deliveries.
    ...forTypes(['EndpointCreated', 'EndpointUpdated', 'EndpointPaused'], nothing),
    TaskCreated: async (e) => {
      const { task, execution } = e.data;
      await schedule(taskAttemptJob(task, execution, 1), Date.parse(execution.scheduled_for), task.enabled);
    },
    TaskTriggered: (e) => dispatchNow(taskAttemptJob(e.data.task, e.data.execution, 1)),
    TaskUpdated: (e) => onTaskChanged(e.data.task),
    TaskDeleted: (e) => deps.timers.purgeSource(e.org_id, e.data.task.id),
    TaskCancelled: (e) => onTaskCancelled(e.org_id, e.data.task.id),
    AttemptFinished: (e) => onAttemptFinished(e.org_id, e.data),
    // A started attempt plans nothing until it finishes; a deferred one is put back on
    // DISPATCH with a delay by the dispatcher itself.
    ...forTypes(['AttemptStarted', 'AttemptDeferred'], nothing),
    ExecutionCancelled: async (e) => {
      if (e.data.lane) await deps.lanes.release(e.org_id, e.data.lane, e.data.execution_id);
    },
    CallbackAttempted: async (e) => {
      const next = nextCallback(e.data);
      if (next) await schedule(next.job, next.dueAt);
    },
    ...forTypes(['ScheduleCreated', 'ScheduleUpdated'], scheduleChanged),
    ScheduleDeleted: (e) => deps.timers.purgeSource(e.org_id, e.data.schedule.id),
    ScheduleTicked: async (e) => {
      const { schedule: s, execution } = e.data;
      await dispatchNow(scheduleAttemptJob(s, execution, 1));
      await armTick(s);
    },
    ScheduleTriggered: (e) => dispatchNow(scheduleAttemptJob(e.data.schedule, e.data.execution, 1)),
    // A monitor's deadline is kept in memory by the deadline keeper (monitor-deadline-keeper.ts),
    // from the monitor's own events (the reader skips them before they get here); a
    // deadline timer in TIMERS from before still fires once.
    ...forTypes(['MonitorCreated', 'MonitorUpdated', 'MonitorPinged', 'MonitorResumed', 'MonitorPaused', 'MonitorWentDown', 'MonitorDeleted', 'MonitorRestated'], nothing),
    BatchAccepted: async (e) => {
      // A batch in one commit holds its tasks' creates (read before it). One written
      // before carries them, and the API appended them right after; if it died
      // half-way, finish the job (the last task present means all are, as they go in order).
      const tasks = e.data.tasks;
      if (!tasks?.length) return;
      const last = tasks[tasks.length - 1]!;
      if (!(await deps.store.last(SUBJECTS.task(last.org_id, last.data.task.id)))) await materializeBatch(deps, e);
    },
    // Organization, API key: no job or timer; the directory reads them when needed.
    ...forTypes(['OrganizationCreated', 'OrganizationPlanChanged', 'OrganizationSettingsUpdated', 'WebhookSecretRotated', 'ApiKeyCreated', 'ApiKeyRevoked'], nothing),
    // Debounce: the window's task arrives as TaskCreated/TaskUpdated; an endpoint's
    // window's deliveries arrive as InboundEventReceived.
    ...forTypes(['DebounceWindowOpened', 'InboundDebounceOpened'], nothing),
    // The notifier's delivery records: NOTIFY already carried the job.
    ...forTypes(['NotificationSent', 'NotificationFailed', 'ChannelTested'], nothing),
    // Notification channels: the notifier's.
    ...forTypes(['ChannelCreated', 'ChannelUpdated', 'ChannelDeleted'], nothing),
    // The owners' (flow-control keys, partition claims); plan-limit reservations.
    ...forTypes(['FlowControlPaused', 'FlowControlResumed', 'QuotaReserved', 'PartitionClaimed'], nothing),
  };

  async function handle(event: JetcronEvent, seq: number): Promise<void> {
    if (event.type.startsWith('Endpoint')) learnEndpoint(event as EndpointEvent, seq);
    await handleEvent(work, event, seq);
  }

  return { handle, forget: () => endpoints.clear() };
}

function chainKey(event: JetcronEvent, subject: string): string {
  // An endpoint's changes and its events' deliveries share one chain: pause, hold, resume in order.
  if ((event.type.startsWith('Endpoint') || event.type.startsWith('InboundEvent')) && 'endpoint' in event.data) {
    return `endpoint:${event.org_id}:${event.data.endpoint.id}`;
  }
  if (event.type.startsWith('Task') && 'task' in event.data && event.data.task.lane) {
    return `lane:${event.org_id}:${event.data.task.lane}`;
  }
  return subject;
}

/** The single active translator (lease `translator`): EVENTS in order from its KV checkpoint, a chain per aggregate, lane or endpoint. */
export function translatorConsumer(deps: TranslatorDeps) {
  const translator = createTranslator(deps);
  return keyedEventConsumer(deps, {
    name: CHECKPOINT_KEY,
    checkpointEveryMs: CHECKPOINT_EVERY_MS,
    span: 'translate',
    handlers: () => {
      translator.forget();
      return {
        keyOf: (e) => chainKey(e.event, e.subject),
        // A monitor's events are the deadline keeper's; tasks' the owners' when they have them.
        skip: (e: StoredEvent<JetcronEvent>) => MONITOR_EVENT_TYPES.has(e.event.type) || (!!deps.ownersHaveTasks && ownersWork(e.event, e.subject)),
        handle: (e) => translator.handle(e.event, e.seq),
      };
    },
  });
}

export function startTranslator(deps: TranslatorDeps) {
  return startConsumers(deps, [translatorConsumer(deps)]);
}
