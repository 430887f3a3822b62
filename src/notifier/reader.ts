import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS, KV_CHECKPOINT_READERS, STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { StoredEvent } from '../events/envelope.ts';
import type { JetcronEvent } from '../events/types.ts';
import type { Clock } from '../lib/clock.ts';
import { unreachable } from '../lib/unreachable.ts';
import { encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { keyedEventConsumer, startConsumers } from '../nats/consumer-kit.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { NotifySourceType } from '../commands/notification/types.ts';
import { monitorDown, type ExecutionSummary, type NotifySource } from './message.ts';
import { notificationIdFor, notifyMsgId, planNotifications, type NotificationJob } from './plan.ts';
import type { SourceResolver } from './sources.ts';
import { cachedNotifyState, nextState, openNotifyState, type NotifyStateStore, type Outcome } from './state.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { untilStarted } from '../runtime/startup-retry.ts';

export const CHECKPOINT_KEY: keyof typeof KV_CHECKPOINT_READERS = 'notifier';
const CHECKPOINT_EVERY_MS = 250;

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
}

/** Hands a planned delivery to the NOTIFY stream; the msg id makes a repeat a no-op. */
export async function publishJob(nats: Nats, job: NotificationJob): Promise<void> {
  await nats.publish(SUBJECTS.notify(job.org_id), encodeJson(job), { msgId: notifyMsgId(job) });
}

/**
 * Decides notifications from events, in order per source: the failure/recovery state
 * machine (`nextState`, kept in KV `notify-state`), then the deliveries the transition
 * makes (`planNotifications`), published to NOTIFY before the new state is stored.
 * Nothing here waits for a delivery.
 */
export function createNotifyDecider(
  deps: Pick<NotifyReaderDeps, 'directory' | 'clock' | 'resolvers' | 'emailEnabled' | 'log'>,
  states: NotifyStateStore & { created?(orgId: string, sourceId: string): void },
  publish: (job: NotificationJob) => Promise<void>,
) {
  async function onOutcome(
    orgId: string,
    seq: number,
    at: string,
    source: { type: NotifySourceType; id: string },
    outcome: Outcome,
    execution: ExecutionSummary | null,
    notificationId: string,
    detail: Pick<NotifySource, 'down'> = {},
  ): Promise<void> {
    const resolve = deps.resolvers[source.type];
    if (!resolve) return;
    const step = nextState(await states.get(orgId, source.id), outcome, { seq, time: at, executionId: execution?.id ?? null });
    if (!step) return;
    const resolved = await resolve(orgId, source.id);
    // Gone (deleted or cancelled while its last run was in flight): nothing to tell, nothing to keep.
    if (!resolved) return;
    const org = await deps.directory.organization(orgId);
    if (org) {
      const jobs = planNotifications({
        id: notificationId,
        transition: step.transition,
        source: { ...resolved, ...detail },
        org,
        execution,
        emailEnabled: deps.emailEnabled,
        now: deps.clock.now(),
      });
      await Promise.all(jobs.map(publish));
    }
    // After the jobs: a crash in between decides the same again, and NOTIFY drops the repeats.
    await states.put(orgId, source.id, step.state);
  }

  async function handle({ event, seq }: StoredEvent<JetcronEvent>): Promise<void> {
    switch (event.type) {
      case 'AttemptFinished': {
        const d = event.data;
        if (d.next_attempt_at) return; // another attempt follows: not the end of the execution
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
        await onOutcome(event.org_id, seq, event.at, d.source, outcome, execution, notificationIdFor(d.execution_id));
        return;
      }
      // A monitor's failure is going down; its recovery is the first ping after.
      case 'MonitorWentDown': {
        const m = event.data.monitor;
        const down = monitorDown(event.data);
        await onOutcome(event.org_id, seq, event.at, { type: 'monitor', id: m.id }, 'failure', null, notificationIdFor(event.id), { down });
        return;
      }
      case 'MonitorPinged': {
        // A start or a log line on a down monitor leaves it down: not a recovery.
        if (event.data.previous_status !== 'down' || event.data.monitor.status !== 'up') return;
        const m = event.data.monitor;
        await onOutcome(event.org_id, seq, event.at, { type: 'monitor', id: m.id }, 'success', null, notificationIdFor(event.id));
        return;
      }
      // A new source has no state yet (see cachedNotifyState).
      case 'TaskCreated':
        states.created?.(event.org_id, event.data.task.id);
        return;
      case 'ScheduleCreated':
        states.created?.(event.org_id, event.data.schedule.id);
        return;
      case 'MonitorCreated':
        states.created?.(event.org_id, event.data.monitor.id);
        return;
      case 'EndpointCreated':
        states.created?.(event.org_id, event.data.endpoint.id);
        return;
      case 'TaskDeleted':
      case 'TaskCancelled':
        await states.forget(event.org_id, event.data.task.id);
        return;
      case 'ScheduleDeleted':
        await states.forget(event.org_id, event.data.schedule.id);
        return;
      case 'MonitorDeleted':
        await states.forget(event.org_id, event.data.monitor.id);
        return;
      case 'EndpointDeleted':
        await states.forget(event.org_id, event.data.endpoint.id);
        return;
      // Organization, API key: the organization is read from the directory when a delivery is planned.
      case 'OrganizationCreated':
      case 'OrganizationPlanChanged':
      case 'OrganizationSettingsUpdated':
      case 'WebhookSecretRotated':
      case 'ApiKeyCreated':
      case 'ApiKeyRevoked':
        return;
      // Task, schedule: a change or a run is not an outcome (its AttemptFinished is); the
      // source's notification settings are read when a delivery is planned.
      case 'TaskUpdated':
      case 'TaskTriggered':
      case 'ScheduleUpdated':
      case 'ScheduleTriggered':
      case 'ScheduleTicked':
        return;
      // Execution: only the end of an execution counts; a started or deferred attempt is
      // not one, a cancelled execution is neither a success nor a failure, and a
      // completion callback's deliveries are not the execution's outcome.
      case 'AttemptStarted':
      case 'AttemptDeferred':
      case 'ExecutionCancelled':
      case 'CallbackAttempted':
        return;
      // Monitor: only going down and the first ping after are transitions.
      case 'MonitorUpdated':
      case 'MonitorPaused':
      case 'MonitorResumed':
        return;
      // Endpoint, inbound event: an endpoint's outcomes are its deliveries' AttemptFinished.
      case 'EndpointUpdated':
      case 'EndpointPaused':
      case 'EndpointResumed':
      case 'InboundEventReceived':
      case 'InboundEventReplayed':
      case 'InboundDebounceOpened':
        return;
      // Debounce, batch: their tasks arrive as TaskCreated (and TaskUpdated).
      case 'DebounceWindowOpened':
      case 'BatchAccepted':
        return;
      // Notification: this notifier's own delivery records; nothing to announce.
      case 'NotificationSent':
      case 'NotificationFailed':
        return;
      // Quota: plan-limit reservations.
      case 'FlowControlPaused':
      case 'FlowControlResumed':
      case 'QuotaReserved':
      case 'PartitionClaimed':
        return;
      default:
        return unreachable(event);
    }
  }

  return { handle };
}

/** The pipeline key: one source's outcomes (and its deletion) stay in order. */
export function notifyChainKey(event: JetcronEvent, subject: string): string {
  switch (event.type) {
    case 'AttemptFinished':
      return `${event.org_id}.${event.data.source.id}`;
    case 'TaskCreated':
    case 'TaskDeleted':
    case 'TaskCancelled':
      return `${event.org_id}.${event.data.task.id}`;
    case 'ScheduleCreated':
    case 'ScheduleDeleted':
      return `${event.org_id}.${event.data.schedule.id}`;
    case 'MonitorCreated':
    case 'MonitorWentDown':
    case 'MonitorPinged':
    case 'MonitorDeleted':
      return `${event.org_id}.${event.data.monitor.id}`;
    case 'EndpointCreated':
    case 'EndpointDeleted':
      return `${event.org_id}.${event.data.endpoint.id}`;
    // Every event `handle` ignores: no order to keep with a source's outcomes, so its own
    // subject (grouped by aggregate as there).
    case 'OrganizationCreated':
    case 'OrganizationPlanChanged':
    case 'OrganizationSettingsUpdated':
    case 'WebhookSecretRotated':
    case 'ApiKeyCreated':
    case 'ApiKeyRevoked':
    case 'TaskUpdated':
    case 'TaskTriggered':
    case 'ScheduleUpdated':
    case 'ScheduleTriggered':
    case 'ScheduleTicked':
    case 'AttemptStarted':
    case 'AttemptDeferred':
    case 'ExecutionCancelled':
    case 'CallbackAttempted':
    case 'MonitorUpdated':
    case 'MonitorPaused':
    case 'MonitorResumed':
    case 'EndpointUpdated':
    case 'EndpointPaused':
    case 'EndpointResumed':
    case 'InboundEventReceived':
    case 'InboundEventReplayed':
    case 'InboundDebounceOpened':
    case 'DebounceWindowOpened':
    case 'BatchAccepted':
    case 'NotificationSent':
    case 'NotificationFailed':
    case 'FlowControlPaused':
    case 'FlowControlResumed':
    case 'QuotaReserved':
    case 'PartitionClaimed':
      return subject;
    default: {
      // A new event type fails the build here until it is listed above. At run time an
      // unknown type (from a newer writer) still keys on its subject: this runs outside
      // the per-event retry-and-record, where a throw would fail the whole read batch;
      // `handle`, next for the same event, records it instead (unreachable).
      const unlisted: never = event;
      void unlisted;
      return subject;
    }
  }
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
 * through a keyed pipeline (one chain per source), the translator's shape.
 */
export function startNotifyReader(deps: NotifyReaderDeps) {
  return startConsumers(deps, [keyedEventConsumer(deps, {
    name: CHECKPOINT_KEY,
    checkpointEveryMs: CHECKPOINT_EVERY_MS,
    // An outcome's notification continues the outcome's trace (its EVENTS message header).
    span: 'notify-decide',
    open: () => openNotifyState(deps.nats),
    handlers: (store) => {
      // A fresh cache per lease term: another holder may have written meanwhile.
      const decider = createNotifyDecider(deps, cachedNotifyState(store), (job) => publishJob(deps.nats, job));
      return { keyOf: (e) => notifyChainKey(e.event, e.subject), handle: (e) => decider.handle(e) };
    },
  })]);
}
