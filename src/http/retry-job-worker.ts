import pLimit from 'p-limit';
import type { Selectable } from 'kysely';
import { STREAMS } from '../../streams/definitions.ts';
import { decideRetry } from '../commands/execution/retry.ts';
import { loadLatestJob, recordJobSteps } from '../commands/job/handlers.ts';
import type { JobStep, RetryJob } from '../commands/job/types.ts';
import type { RetryIds } from '../commands/task/types.ts';
import type { Envelope } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import type { EventStore } from '../commands/store.ts';
import type { ExecutionsTable } from '../db/schema.ts';
import { replayInboundEvent } from './replay-event.ts';
import { derivedId } from '../lib/ids.ts';
import type { ApiDeps } from './context.ts';
import { runRetry } from './routes/executions.ts';
import { ApiError } from '../lib/errors.ts';
import type { LeasedConsumer } from '../nats/consumer-kit.ts';
import type { Lease } from '../nats/lease.ts';
import { PROJECTOR_NAME } from '../projections/projector.ts';

/** How often an idle worker looks for a running job, and a catching-up one at the projector. */
const POLL_MS = 200;
/**
 * The executions one `RetryJobStepped` records. A holder works on at most this many
 * positions from the job's recorded one, so a successor treats exactly these as
 * possibly taken by its predecessor (`fencedStore`'s look back): never lower it below
 * what a running version uses.
 */
export const JOB_GROUP = 500;
/** Retries of a group in flight at once (each its own subject's guarded append). */
const IN_FLIGHT = 64;

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

/** The holder's term is over (lease lapsed or stopping): nothing more of it may be appended. */
class TermOver extends Error {
  constructor() {
    super('the retry-jobs lease is no longer held: this holder appends nothing more');
    this.name = 'TermOver';
  }
}

/** The retry a step was about to append is in the log already (a predecessor's): the step took it. */
class AlreadyAppended extends Error {
  readonly executionId: string | null;
  constructor(executionId: string | null) {
    super('appended already');
    this.name = 'AlreadyAppended';
    this.executionId = executionId;
  }
}

/** The new execution an appended retry (or replay) made. */
function madeExecution(event: Envelope): string | null {
  const e = event as JetcronEvent;
  if (e.type === 'TaskTriggered' || e.type === 'ScheduleTriggered') return e.data.execution.id;
  if (e.type === 'InboundEventReplayed') return e.data.executions[0]?.execution_id ?? null;
  return null;
}

/** The ids the retry of a job's position is appended under: the same for every holder, so one finds another's. */
export const retryIdsOf = (job: RetryJob, position: number): RetryIds => ({
  eventId: derivedId('evt', Date.parse(job.created_at), job.id, position),
  executionId: derivedId('exe', Date.parse(job.created_at), `${job.id}:exe`, position),
});

/** The event with this id among `subject`'s messages after `after`, up to `upTo`. */
async function findOnSubject(store: EventStore, subject: string, after: number, upTo: number, eventId: string): Promise<Envelope | null> {
  for (let from = after + 1; from <= upTo;) {
    const msg = await store.nextMessage!(subject, from);
    if (!msg || msg.seq > upTo) return null;
    const hit = msg.events.find((e) => e.id === eventId);
    if (hit) return hit;
    from = msg.seq + 1;
  }
  return null;
}

/**
 * The store a holder's retries are appended through: the fence of a holder that lost
 * its lease without knowing (frozen, cut off), as a partition owner's claim fences its
 * predecessor's commits. Every append asks `mayWrite()` after its load, so it is
 * guarded by a sequence read while the lease was held; a successor's retry of the same
 * execution changes that subject, and the late append fails on its guard and, decided
 * again, stops here. `lookBack`: the first group after a takeover (or an error) may hold
 * retries a predecessor appended after the job's last step (the jobs subject's sequence
 * `lookBack`); each append first looks on its subject, between that and the sequence it
 * is guarded by, for its own event id (derived from the job and position), and takes
 * what it finds instead of appending again. A predecessor's append landing after that
 * look makes this one fail its guard, and the look is made again.
 */
function fencedStore(store: EventStore, mayWrite: () => boolean, lookBack: number | null): EventStore {
  const guard = async (subject: string, head: Envelope, expectedSeq: number | undefined): Promise<number | undefined> => {
    if (lookBack === null) {
      if (!mayWrite()) throw new TermOver();
      return expectedSeq;
    }
    // An unguarded append (a replay) is guarded here by what the look saw.
    const upTo = expectedSeq ?? (await store.lastMessage(subject))?.seq ?? 0;
    const found = await findOnSubject(store, subject, lookBack, upTo, head.id);
    if (found) throw new AlreadyAppended(madeExecution(found));
    if (!mayWrite()) throw new TermOver();
    return upTo;
  };
  return {
    ...store,
    wraps: store,
    async append(subject, event, expectedSeq) {
      return store.append(subject, event, await guard(subject, event, expectedSeq));
    },
    async appendCommit(subject, events, expectedSeq, texts) {
      return store.appendCommit(subject, events, await guard(subject, events[events.length - 1]!, expectedSeq), texts);
    },
  };
}

type SetRow = Pick<Selectable<ExecutionsTable>, 'id' | 'status' | 'source_type' | 'source_id' | 'url' | 'parent_id' | 'callback_url' | 'retried_by'>;

/**
 * The worker of bulk retry jobs (one holder across the service: the `retry-jobs` lease).
 * A job's set is in its row (from `RetryJobAccepted`); it is taken in groups of
 * `JOB_GROUP` positions: each execution of a group is retried as `POST
 * /executions/{id}/retry` would (`decideRetry`, `runRetry`), `IN_FLIGHT` at once, or
 * skipped when it no longer qualifies (gone, already retried, its source gone); then
 * the group is recorded with one `RetryJobStepped`, a guarded append on the
 * organization's jobs subject naming the position it starts at (a group recorded
 * already, or a cancel, makes it nothing). Each retry is appended under ids derived from
 * the job and position, through `fencedStore`. A new holder first waits until the
 * projector has everything the log held when it took the lease: an execution its
 * predecessor retried and that is projected shows `retried_by`.
 */
export function retryJobWorker(deps: ApiDeps, log: (m: string) => void): LeasedConsumer {
  async function projectedUpTo(seq: number, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const row = await deps.db.selectFrom('projection_checkpoints').select('seq').where('name', '=', PROJECTOR_NAME).executeTakeFirst();
      if (Number(row?.seq ?? 0) >= seq) return;
      await pause(POLL_MS, signal);
    }
  }

  const skipped = (executionId: string, reason: string): JobStep => ({ execution_id: executionId, outcome: 'skipped', retry_id: null, reason });
  const retried = (executionId: string, retryId: string | null): JobStep => ({ execution_id: executionId, outcome: 'retried', retry_id: retryId, reason: null });

  async function retryStep(fenced: ApiDeps, job: RetryJob, position: number, executionId: string, row: SetRow | undefined): Promise<JobStep> {
    if (!row) return skipped(executionId, 'the execution is gone (its source was deleted)');
    const ids = retryIdsOf(job, position);
    // Retried by this very step before a crash or takeover: the step took it.
    if (row.retried_by === ids.executionId) return retried(executionId, ids.executionId);
    if (row.retried_by) return skipped(executionId, `already retried by ${row.retried_by}`);
    try {
      return retried(executionId, await runRetry(fenced, job.org_id, decideRetry(row), ids));
    } catch (err) {
      if (err instanceof AlreadyAppended) return retried(executionId, err.executionId);
      if (err instanceof ApiError && err.status === 409) return skipped(executionId, err.message);
      throw err;
    }
  }

  /**
   * A replay job's step: the event again to the job's forward URLs (all the endpoint's
   * when null), each new delivery `retry_of` the event's latest earlier one to that URL,
   * under the event id of the job's position.
   */
  async function replayStep(fenced: ApiDeps, job: RetryJob, position: number, eventId: string): Promise<JobStep> {
    const orgId = job.org_id;
    const row = await deps.db.selectFrom('inbound_events').selectAll().where('id', '=', eventId).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) return skipped(eventId, 'the inbound event is gone');
    const earlier = await deps.db.selectFrom('executions').select(['id', 'url']).where('parent_id', '=', eventId).where('org_id', '=', orgId)
      .orderBy('created_at', 'asc').orderBy('id', 'asc').execute();
    const latest = new Map(earlier.map((x) => [x.url, x.id]));
    const endpoint = await deps.endpoints.get(orgId, row.endpoint_id);
    const urls = job.forward_urls ?? endpoint?.forward_urls ?? [];
    try {
      const { ids } = await replayInboundEvent(fenced, orgId, row, { urls, retryOf: (u) => latest.get(u), eventId: retryIdsOf(job, position).eventId });
      return retried(eventId, ids[0] ?? null);
    } catch (err) {
      if (err instanceof AlreadyAppended) return retried(eventId, err.executionId);
      if (err instanceof ApiError && (err.status === 409 || err.status === 404)) return skipped(eventId, err.message);
      throw err;
    }
  }

  /** The group of `job` from its position: each taken, `IN_FLIGHT` at once, in the set's order. */
  async function takeGroup(job: RetryJob, ids: readonly string[], fenced: ApiDeps): Promise<JobStep[]> {
    const group = ids.slice(job.position, Math.min(job.total, job.position + JOB_GROUP));
    const rows = job.kind === 'replay' ? new Map<string, SetRow>() : new Map((await deps.db.selectFrom('executions')
      .select(['id', 'status', 'source_type', 'source_id', 'url', 'parent_id', 'callback_url', 'retried_by'])
      .where('org_id', '=', job.org_id).where('id', 'in', group).execute()).map((r) => [r.id, r]));
    const slots = pLimit(IN_FLIGHT);
    // Settled, not raced: a failed step leaves none of the others running on after the group.
    const settled = await Promise.allSettled(group.map((executionId, i) => slots(() => {
      const position = job.position + i;
      return job.kind === 'replay' ? replayStep(fenced, job, position, executionId) : retryStep(fenced, job, position, executionId, rows.get(executionId));
    })));
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((r) => (r as PromiseFulfilledResult<JobStep>).value);
  }

  async function advance(jobId: string, orgId: string, signal: AbortSignal, lease: Lease): Promise<void> {
    const mayWrite = () => !signal.aborted && lease.held();
    let { job, seq } = await loadLatestJob(deps.store, orgId);
    if (!job || job.id !== jobId || job.status !== 'running') return;
    const row = await deps.db.selectFrom('jobs').select(['execution_ids']).where('id', '=', jobId).executeTakeFirst();
    const ids = (row?.execution_ids ?? []) as string[];
    if (ids.length !== job.total) throw new Error(`job ${jobId}: its row holds ${ids.length} of ${job.total} executions`);
    // The first group looks back for a predecessor's retries (or this holder's own, when an error cut its last group short).
    let lookBack: number | null = seq;
    while (job && job.id === jobId && job.status === 'running' && mayWrite()) {
      const steps = await takeGroup(job, ids, { ...deps, store: fencedStore(deps.store, mayWrite, lookBack) });
      const recorded = await recordJobSteps(deps, orgId, { jobId, position: job.position, steps });
      // Nothing recorded: cancelled meanwhile, or the group is another holder's. Read again next round.
      if (!recorded.events.length) return;
      ({ state: job, seq } = recorded);
      lookBack = null;
    }
  }

  return {
    lease: 'retry-jobs',
    async term(signal, _opened, lease) {
      log('bulk jobs: this process holds their lease and advances them');
      await projectedUpTo((await deps.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq, signal);
      try {
        while (!signal.aborted && lease.held()) {
          const running = await deps.db.selectFrom('jobs').select(['id', 'org_id']).where('status', '=', 'running').orderBy('created_at').execute();
          for (const j of running) {
            try {
              await advance(j.id, j.org_id, signal, lease);
            } catch (err) {
              if (err instanceof TermOver) return;
              log(`retry job ${j.id}: ${(err as Error).message}; taken up again in a moment`);
            }
          }
          await pause(POLL_MS, signal);
        }
      } finally {
        // Every append of this term is settled by now (a group waits for all of its own). The
        // log lines avoid the word "retry": a bench counts such lines as trouble.
        if (!lease.held()) log('bulk jobs: their lease is no longer held; this holder has stopped');
      }
    },
  };
}
