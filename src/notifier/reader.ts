import { boundedMap } from '../lib/bounded-map.ts';
import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS, KV_CHECKPOINT_READERS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import { forTypes, handle as handleEvent, type EventHandlers, type EventOf, type EventType, type JetcronEvent } from '../commands/events.ts';
import type { Clock } from '../lib/clock.ts';
import { encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { keyedEventConsumer, startConsumers } from '../nats/consumer-kit.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { NotifySourceType } from '../commands/notification/types.ts';
import type { Channel } from '../commands/channel/types.ts';
import { monitorDown, type ExecutionSummary, type NotifySource } from './message.ts';
import { notificationIdFor, notifies, notifyMsgId, organizationWants, planNotifications, type NotificationJob } from './plan.ts';
import { forwardSource, monitorSource, scheduleSource, type SourceResolver } from './sources.ts';
import { createHealthCounter } from './health.ts';
import type { EventStore } from '../commands/store.ts';
import { nextState, openNotifyState, type CachedNotifyState, type NotifyStateStore, type Outcome, type SourceState, type Transition } from './state.ts';
import { JOURNAL_DEFAULTS, journaledNotifyState, openStateJournal } from './state-journal.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { untilStarted } from '../lib/startup-retry.ts';

type HealthCounter = ReturnType<typeof createHealthCounter>;

export const CHECKPOINT_KEY: keyof typeof KV_CHECKPOINT_READERS = 'notifier';
const CHECKPOINT_EVERY_MS = 250;
/** Failing tasks whose source a recovery takes without a read (`failingTasks`): ~10 MiB at most. */
const FAILING_TASKS_KEPT = 20_000;

export interface NotifyReaderDeps {
  nats: Nats;
  directory: Directory;
  clock: Clock;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
  resolvers: Partial<Record<NotifySourceType, SourceResolver>>;
  /** Whether this notifier sends email (SMTP_URL set): email deliveries are planned only then. */
  emailEnabled: boolean;
  /** The organization's notification channels (`ChannelDirectory`); none when absent. */
  channels?: (orgId: string) => Promise<Channel[]>;
  /** The channels as held, without a read (undefined: not read yet): a recovery nobody hears is then settled at once. */
  knownChannels?: (orgId: string) => Channel[] | undefined;
  /** `{root_url}`, what channel messages link to. */
  rootUrl?: () => string;
  /** Where destination health's counts are appended (`createHealthCounter`); none: results are not counted. */
  store?: EventStore;
}

/** The events that mean nothing for notifications (`handle` passes them, their chain is their subject). */
const IGNORED = [
  // Organization, API key: the organization is read from the directory when a delivery is planned.
  'OrganizationCreated', 'OrganizationPlanChanged', 'OrganizationSettingsUpdated', 'WebhookSecretRotated', 'ApiKeyCreated', 'ApiKeyRevoked',
  // Task, schedule: a change or a run is not an outcome (its AttemptFinished is); the
  // source's notification settings are read when a delivery is planned.
  'TaskTriggered', 'ScheduleUpdated', 'ScheduleTriggered', 'ScheduleTicked', 'ScheduleTicksMissed',
  // Execution: only the end of an execution counts; a started or deferred attempt is
  // not one, a cancelled execution is neither a success nor a failure, and a
  // completion callback's deliveries are not the execution's outcome.
  'AttemptStarted', 'AttemptDeferred', 'ExecutionCancelled', 'CallbackAttempted',
  // Monitor: only going down and the first ping after are transitions.
  'MonitorUpdated', 'MonitorPaused', 'MonitorResumed', 'MonitorRestated',
  // Endpoint, inbound event: an endpoint's outcomes are its deliveries' AttemptFinished.
  'EndpointUpdated', 'EndpointPaused', 'EndpointResumed', 'InboundEventReceived', 'InboundEventReplayed', 'InboundDebounceOpened',
  // Debounce, batch: their tasks arrive as TaskCreated (and TaskUpdated).
  'DebounceWindowOpened', 'BatchAccepted',
  // This notifier's own delivery records; flow-control keys, plan-limit reservations, partition claims, a lane head's hand-off.
  'NotificationSent', 'NotificationFailed', 'ChannelTested', 'FlowControlPaused', 'FlowControlResumed', 'QuotaReserved', 'PartitionClaimed', 'ExecutionHandedToKey',
  // Notification channels: read from their own subject when a transition is planned (`ChannelDirectory`).
  'ChannelCreated', 'ChannelUpdated', 'ChannelDeleted',
  'RetryJobAccepted', 'RetryJobStepped', 'RetryJobCancelled',
  // Destination health: only being disabled is announced (the counts are this reader's own doing).
  'ScheduleFailureCounted', 'ScheduleFailuresReset', 'EndpointForwardFailureCounted', 'EndpointForwardFailuresReset', 'EndpointForwardEnabled',
] as const satisfies readonly EventType[];

const IGNORED_TYPES: ReadonlySet<string> = new Set<string>(IGNORED);

/** Hands a planned delivery to the NOTIFY stream; the msg id makes a repeat a no-op. */
export async function publishJob(nats: Nats, job: NotificationJob): Promise<void> {
  await nats.publish(SUBJECTS.notify(job.org_id), encodeJson(job), { msgId: notifyMsgId(job) });
}

/**
 * Decides notifications from events, in order per source: the failure/recovery state
 * machine (`nextState`, kept by `journaledNotifyState`), then the deliveries the transition
 * makes (`planNotifications`), published to NOTIFY before the new state is stored.
 * Nothing here waits for a delivery.
 */
export function createNotifyDecider(
  deps: Pick<NotifyReaderDeps, 'directory' | 'clock' | 'resolvers' | 'emailEnabled' | 'log' | 'channels' | 'knownChannels' | 'rootUrl'>,
  states: NotifyStateStore & Partial<Pick<CachedNotifyState, 'created' | 'peek'>>,
  publish: (job: NotificationJob) => Promise<void>,
  /** Destination health's counting of final results (`src/notifier/health.ts`); none: not counted here. */
  health?: HealthCounter,
) {
  /** The deliveries of one transition of `source`, to NOTIFY (nothing when nobody hears it). */
  async function announce(
    orgId: string,
    at: string,
    transition: Transition,
    source: NotifySource,
    execution: ExecutionSummary | null,
    notificationId: () => string,
  ): Promise<void> {
    const org = await deps.directory.organization(orgId);
    // The channels are asked only when the organization's channels hear this transition at all.
    const channels = org && deps.channels && organizationWants(source, org, transition) ? await deps.channels(orgId) : [];
    if (!org || !notifies(source, org, transition, deps.emailEnabled, channels)) return;
    const jobs = planNotifications({
      id: notificationId(),
      transition,
      source,
      org,
      execution,
      emailEnabled: deps.emailEnabled,
      now: deps.clock.now(),
      channels,
      rootUrl: deps.rootUrl?.() ?? '',
      at,
    });
    await Promise.all(jobs.map(publish));
  }

  /**
   * Failing tasks as their failure's notification read them, for their recovery: a
   * recovery is then no read of the task (an outage's end recovers thousands at once).
   * A task's change or delete drops it, in order with its outcomes (its chain); a miss
   * (a later lease term, many failing at once) reads the task as before.
   */
  const failingTasks = boundedMap<NotifySource>(FAILING_TASKS_KEPT);
  const taskKey = (orgId: string, id: string) => `${orgId}.${id}`;

  async function onOutcome(
    orgId: string,
    seq: number,
    at: string,
    source: { type: NotifySourceType; id: string },
    outcome: Outcome,
    execution: ExecutionSummary | null,
    /** Made only when the transition has somewhere to go (a going down's id is a hash of the event id). */
    notificationId: () => string,
    detail: Pick<NotifySource, 'down'> = {},
    /** The source as the event carries it (a monitor's events do): no read. */
    carried?: NotifySource,
  ): Promise<void> {
    const resolve = deps.resolvers[source.type];
    if (!resolve) return;
    const step = nextState(await states.get(orgId, source.id), outcome, { seq, time: at, executionId: execution?.id ?? null });
    if (!step) return;
    const kept = source.type === 'task' ? taskKey(orgId, source.id) : null;
    const known = kept && step.transition === 'recovered' ? failingTasks.get(kept) : undefined;
    if (kept) failingTasks.delete(kept);
    const resolved = carried ?? known ?? await resolve(orgId, source.id);
    // Gone (deleted or cancelled while its last run was in flight): nothing to tell, nothing to keep.
    if (!resolved) return;
    if (kept && step.transition === 'failed') failingTasks.set(kept, resolved);
    await announce(orgId, at, step.transition, { ...resolved, ...detail }, execution, notificationId);
    // After the jobs: a crash in between decides the same again, and NOTIFY drops the repeats.
    await states.put(orgId, source.id, step.state);
  }

  type Step<T extends EventType> = (e: EventOf<T>, seq: number) => Promise<void>;
  const nothing = async () => {};
  // A new source has no state yet (see cachedNotifyState).
  const created = (orgId: string, id: string) => {
    states.created?.(orgId, id);
    return Promise.resolve();
  };
  const taskGone: Step<'TaskDeleted' | 'TaskCancelled'> = (e) => {
    failingTasks.delete(taskKey(e.org_id, e.data.task.id));
    return states.forget(e.org_id, e.data.task.id);
  };

  /** What each event means for notifications: an outcome (a transition may follow), a source born or gone, or nothing. */
  const steps: EventHandlers<Promise<void>, [number]> = {
    AttemptFinished: async (e, seq) => {
      const d = e.data;
      if (!d.final) return; // another attempt follows: not the end of the execution
      if (d.late) return; // a fenced owner's, history only: the execution's own end is another event
      const execution: ExecutionSummary = {
        id: d.execution_id,
        status: d.status,
        status_code: d.status_code,
        error_message: d.error_message,
        attempt: d.attempt,
        scheduled_for: d.scheduled_for,
        finished_at: d.finished_at,
      };
      const outcome: Outcome = d.status === 'success' ? 'success' : 'failure';
      await onOutcome(e.org_id, seq, e.at, d.source, outcome, execution, () => notificationIdFor(d.execution_id));
      await health?.onFinal(e, seq);
    },
    // Destination health disabled a schedule or a forward URL: announced once, under an id
    // derived from the event's (deciding it again after a crash publishes the same msg ids,
    // which NOTIFY drops; the deliverer's ledger keeps a delivery from going twice).
    ScheduleDisabled: (e) => announce(e.org_id, e.at, 'disabled', scheduleSource(e.data.schedule), e.data.execution ?? null, () => notificationIdFor(e.id)),
    EndpointForwardDisabled: (e) => announce(e.org_id, e.at, 'disabled', forwardSource(e.data.endpoint, e.data.url), e.data.execution ?? null, () => notificationIdFor(e.id)),
    // A monitor's failure is going down; its recovery is the first ping after.
    MonitorWentDown: async (e, seq) => {
      const m = e.data.monitor;
      await onOutcome(e.org_id, seq, e.at, { type: 'monitor', id: m.id }, 'failure', null, () => notificationIdFor(e.id), { down: monitorDown(e.data) }, monitorSource(m));
    },
    MonitorPinged: async (e, seq) => {
      // A start or a log line on a down monitor leaves it down: not a recovery.
      if (e.data.previous_status !== 'down' || e.data.monitor.status !== 'up') return;
      await onOutcome(e.org_id, seq, e.at, { type: 'monitor', id: e.data.monitor.id }, 'success', null, () => notificationIdFor(e.id), {}, monitorSource(e.data.monitor));
    },
    TaskCreated: (e) => created(e.org_id, e.data.task.id),
    ScheduleCreated: (e) => created(e.org_id, e.data.schedule.id),
    MonitorCreated: (e) => created(e.org_id, e.data.monitor.id),
    EndpointCreated: (e) => created(e.org_id, e.data.endpoint.id),
    // A change may change how the task wants to hear of its recovery: read it then.
    TaskUpdated: async (e) => failingTasks.delete(taskKey(e.org_id, e.data.task.id)),
    TaskDeleted: taskGone,
    TaskCancelled: taskGone,
    ScheduleDeleted: (e) => states.forget(e.org_id, e.data.schedule.id),
    MonitorDeleted: (e) => states.forget(e.org_id, e.data.monitor.id),
    EndpointDeleted: (e) => states.forget(e.org_id, e.data.endpoint.id),
    ...forTypes(IGNORED, nothing),
  };

  async function handle({ event, seq }: StoredEvent<JetcronEvent>): Promise<void> {
    // An unknown type (from a newer writer) fails here, inside the per-event retry-and-record.
    await handleEvent(steps, event, seq);
  }

  /** The cached state `known` (undefined: not known) says this outcome changes nothing (no transition, no write). */
  const unchanged = (known: SourceState | null | undefined, outcome: Outcome, seq: number, at: string) =>
    known !== undefined && nextState(known, outcome, { seq, time: at, executionId: null }) === null;

  /**
   * A task's recovery that nobody hears of (no own URL; the organization's channels do not
   * want it, or have nowhere to send it), known without a read: decided at once, its new
   * state on its way to the journal. An outage's end recovers thousands of tasks at once,
   * and each went down the chain (a span, the source, the organization and its channels
   * asked, the state read and written: 0.07 of the bulk-retry rate, docs/failure-recovery.md).
   * Null: the chain decides it (`onOutcome`).
   */
  function quietRecovery(e: EventOf<'AttemptFinished'>, seq: number, prev: SourceState | null | undefined): Promise<void> | null {
    const d = e.data;
    if (d.source.type !== 'task' || d.status !== 'success') return null;
    const step = prev ? nextState(prev, 'success', { seq, time: e.at, executionId: d.execution_id }) : null;
    if (!step) return null;
    const kept = taskKey(e.org_id, d.source.id);
    const source = failingTasks.get(kept);
    const org = deps.directory.known(e.org_id);
    if (!source || !org) return null;
    const channels = organizationWants(source, org, 'recovered') ? deps.knownChannels?.(e.org_id) ?? (deps.channels ? undefined : []) : [];
    if (!channels || notifies(source, org, 'recovered', deps.emailEnabled, channels)) return null;
    failingTasks.delete(kept);
    return states.put(e.org_id, d.source.id, step.state);
  }

  /**
   * What is decided at once, with nothing to read (the keyed reader calls this only while
   * nothing of the source is in flight, so the cache is current): a source born, an
   * outcome that is no transition (true: done). Most events of a healthy deployment end
   * here. A recovery nobody hears of is decided here too; its promise is the state's write.
   */
  function settle({ event: e, seq }: StoredEvent<JetcronEvent>): boolean | Promise<void> {
    switch (e.type) {
      case 'TaskCreated':
      case 'ScheduleCreated':
      case 'MonitorCreated':
      case 'EndpointCreated':
      case 'TaskUpdated':
        void steps[e.type](e as never, seq);
        return true;
      case 'AttemptFinished': {
        if (!(health?.settled(e) ?? true)) return false;
        if (!e.data.final || e.data.late === true) return true;
        // Peeked once: each look-up in the notifier's large maps costs about a microsecond.
        const known = states.peek?.(e.org_id, e.data.source.id);
        if (unchanged(known, e.data.status === 'success' ? 'success' : 'failure', seq, e.at)) return true;
        return quietRecovery(e, seq, known) ?? false;
      }
      case 'MonitorPinged':
        return e.data.previous_status !== 'down' || e.data.monitor.status !== 'up' || unchanged(states.peek?.(e.org_id, e.data.monitor.id), 'success', seq, e.at);
      case 'MonitorWentDown':
        return unchanged(states.peek?.(e.org_id, e.data.monitor.id), 'failure', seq, e.at);
      default:
        return false;
    }
  }

  return { handle, settle };
}

/** The source whose outcomes an event's order matters to; null: none (its own subject keys it). */
const sourceOf: { [T in EventType]: ((e: EventOf<T>) => string) | null } = {
  AttemptFinished: (e) => e.data.source.id,
  TaskCreated: (e) => e.data.task.id,
  TaskUpdated: (e) => e.data.task.id,
  TaskDeleted: (e) => e.data.task.id,
  TaskCancelled: (e) => e.data.task.id,
  ScheduleCreated: (e) => e.data.schedule.id,
  ScheduleDeleted: (e) => e.data.schedule.id,
  MonitorCreated: (e) => e.data.monitor.id,
  MonitorWentDown: (e) => e.data.monitor.id,
  MonitorPinged: (e) => e.data.monitor.id,
  MonitorDeleted: (e) => e.data.monitor.id,
  EndpointCreated: (e) => e.data.endpoint.id,
  EndpointDeleted: (e) => e.data.endpoint.id,
  ScheduleDisabled: (e) => e.data.schedule.id,
  EndpointForwardDisabled: (e) => e.data.endpoint.id,
  // Every event the notifier ignores: no order to keep with a source's outcomes.
  ...forTypes(IGNORED, null),
};

/**
 * The pipeline key: one source's outcomes (and its deletion) stay in order. An unknown
 * type (from a newer writer) keys on its subject: this runs outside the per-event
 * retry-and-record, where a throw would fail the whole read batch; `handle` records it.
 */
export function notifyChainKey(event: JetcronEvent, subject: string): string {
  const source = sourceOf[event.type] as ((e: JetcronEvent) => string) | null | undefined;
  return source ? `${event.org_id}.${source(event)}` : subject;
}

/**
 * A notifier that has never run starts at the end of EVENTS, not at its beginning:
 * turning notifications on must not announce every failure in the history. `create`
 * only writes when there is no checkpoint, so concurrent starts agree.
 */
export async function ensureCheckpoint(nats: Nats, log: (m: string) => void): Promise<void> {
  await untilStarted('reading the notifier checkpoint', async () => {
    const kv: KV = await new Kvm(nats.nc).open(KV_BUCKETS.checkpoints.name);
    const current = await kv.get(CHECKPOINT_KEY);
    if (current && current.operation === 'PUT') return;
    const info = await nats.jsm.streams.info(STREAMS.events.name);
    await kv.create(CHECKPOINT_KEY, String(info.state.last_seq)).catch((err: unknown) => {
      // Another notifier wrote it first; any other failure is retried, or the reader
      // would start from the beginning of the log and announce its whole history.
      if (!isWrongLastSequence(err)) throw err;
    });
  }, log);
}

/**
 * The single active reader (lease `notifier`): EVENTS in order from its KV checkpoint,
 * through a keyed pipeline (one chain per source, `readEventsKeyed`).
 */
export function startNotifyReader(deps: NotifyReaderDeps) {
  return startConsumers(deps, [keyedEventConsumer(deps, {
    name: CHECKPOINT_KEY,
    checkpointEveryMs: CHECKPOINT_EVERY_MS,
    // An outcome's notification continues the outcome's trace (its EVENTS message header).
    span: 'notify-decide',
    open: () => openNotifyState(deps.nats),
    handlers: (store, signal) => {
      // A fresh state per lease term, from the journal: another holder may have written meanwhile.
      const states = journaledNotifyState(store, openStateJournal(deps.nats, deps.log), { ...JOURNAL_DEFAULTS, log: deps.log, signal });
      const health = deps.store ? createHealthCounter({ store: deps.store, clock: deps.clock, directory: deps.directory }) : undefined;
      const decider = createNotifyDecider(deps, states, (job) => publishJob(deps.nats, job), health);
      return {
        keyOf: (e) => notifyChainKey(e.event, e.subject),
        skip: (e) => IGNORED_TYPES.has(e.event.type),
        settle: decider.settle,
        handle: (e) => decider.handle(e),
      };
    },
  })]);
}
