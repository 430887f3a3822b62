import { STREAMS } from '../../streams/definitions.ts';
import { decideRetry } from '../commands/execution/retry.ts';
import { loadLatestJob, recordJobStep } from '../commands/job/handlers.ts';
import type { JobStepOutcome, RetryJob } from '../commands/job/types.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { replayInboundEvent } from './replay-event.ts';
import { derivedId } from '../lib/ids.ts';

type Step = { outcome: JobStepOutcome; retryId: string | null; reason: string | null };
import type { ApiDeps } from './context.ts';
import { runRetry } from './routes/executions.ts';
import { ApiError } from '../lib/errors.ts';
import type { LeasedConsumer } from '../nats/consumer-kit.ts';
import type { Lease } from '../nats/lease.ts';
import { PROJECTOR_NAME } from '../projections/projector.ts';

/** How often an idle worker looks for a running job, and a catching-up one at the projector. */
const POLL_MS = 200;

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

/**
 * The worker of bulk retry jobs (one holder across the service: the `retry-jobs` lease).
 * A job's set is in its row (from `RetryJobAccepted`); each execution of it is taken in
 * order: retried as `POST /executions/{id}/retry` would (`decideRetry`, `runRetry`), or
 * skipped when it no longer qualifies (gone, already retried, its source gone), then the
 * step is recorded with `RetryJobStepped`, a guarded append on the organization's jobs
 * subject that names the position it took (a step recorded already, or a cancel, makes
 * it nothing). A new holder first waits until the projector has everything the log held
 * when it took the lease: an execution its predecessor retried without recording the
 * step then shows `retried_by` and is skipped, never retried twice.
 */
export function retryJobWorker(deps: ApiDeps, log: (m: string) => void): LeasedConsumer {
  async function projectedUpTo(seq: number, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const row = await deps.db.selectFrom('projection_checkpoints').select('seq').where('name', '=', PROJECTOR_NAME).executeTakeFirst();
      if (Number(row?.seq ?? 0) >= seq) return;
      await pause(POLL_MS, signal);
    }
  }

  async function step(orgId: string, executionId: string): Promise<Step> {
    const row = await deps.db.selectFrom('executions').select(['id', 'status', 'source_type', 'source_id', 'url', 'parent_id', 'retried_by'])
      .where('id', '=', executionId).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) return { outcome: 'skipped', retryId: null, reason: 'the execution is gone (its source was deleted)' };
    if (row.retried_by) return { outcome: 'skipped', retryId: null, reason: `already retried by ${row.retried_by}` };
    try {
      return { outcome: 'retried', retryId: await runRetry(deps, orgId, decideRetry(row)), reason: null };
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) return { outcome: 'skipped', retryId: null, reason: err.message };
      throw err;
    }
  }

  /**
   * A replay job's step: the event again to the job's forward URLs (all the endpoint's
   * when null), each new delivery `retry_of` the event's latest earlier one to that URL.
   * The replay's event id derives from the job and the position: a holder taking the
   * position again after a crash finds it as the event subject's last and does not
   * replay twice.
   */
  async function replayStep(job: RetryJob, eventId: string): Promise<Step> {
    const orgId = job.org_id;
    const row = await deps.db.selectFrom('inbound_events').selectAll().where('id', '=', eventId).where('org_id', '=', orgId).executeTakeFirst();
    if (!row) return { outcome: 'skipped', retryId: null, reason: 'the inbound event is gone' };
    const replayId = derivedId('evt', Date.parse(job.created_at), job.id, job.position);
    const last = await deps.store.last<JetcronEvent>(SUBJECTS.inboundEvent(orgId, eventId));
    if (last?.event.id === replayId && last.event.type === 'InboundEventReplayed') {
      return { outcome: 'retried', retryId: last.event.data.executions[0]?.execution_id ?? null, reason: null };
    }
    const earlier = await deps.db.selectFrom('executions').select(['id', 'url']).where('parent_id', '=', eventId).where('org_id', '=', orgId)
      .orderBy('created_at', 'asc').orderBy('id', 'asc').execute();
    const latest = new Map(earlier.map((x) => [x.url, x.id]));
    const endpoint = await deps.endpoints.get(orgId, row.endpoint_id);
    const urls = job.forward_urls ?? endpoint?.forward_urls ?? [];
    try {
      const { ids } = await replayInboundEvent(deps, orgId, row, { urls, retryOf: (u) => latest.get(u), eventId: replayId });
      return { outcome: 'retried', retryId: ids[0] ?? null, reason: null };
    } catch (err) {
      if (err instanceof ApiError && (err.status === 409 || err.status === 404)) return { outcome: 'skipped', retryId: null, reason: err.message };
      throw err;
    }
  }

  async function advance(jobId: string, orgId: string, signal: AbortSignal, lease: Lease): Promise<void> {
    const row = await deps.db.selectFrom('jobs').select(['execution_ids']).where('id', '=', jobId).executeTakeFirst();
    const ids = (row?.execution_ids ?? []) as string[];
    let { job } = await loadLatestJob(deps.store, orgId);
    while (job && job.id === jobId && job.status === 'running' && !signal.aborted && lease.held()) {
      const executionId = ids[job.position];
      if (executionId === undefined) throw new Error(`job ${jobId}: no execution at position ${job.position} of ${ids.length}`);
      const taken = job.kind === 'replay' ? await replayStep(job, executionId) : await step(orgId, executionId);
      const { events, state } = await recordJobStep(deps, orgId, { jobId, position: job.position, executionId, ...taken });
      // Nothing recorded: cancelled meanwhile, or the step is another holder's. Read again next round.
      if (!events.length) return;
      job = state;
    }
  }

  return {
    lease: 'retry-jobs',
    async term(signal, _opened, lease) {
      await projectedUpTo((await deps.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq, signal);
      while (!signal.aborted && lease.held()) {
        const running = await deps.db.selectFrom('jobs').select(['id', 'org_id']).where('status', '=', 'running').orderBy('created_at').execute();
        for (const j of running) {
          try {
            await advance(j.id, j.org_id, signal, lease);
          } catch (err) {
            log(`retry job ${j.id}: ${(err as Error).message}; taken up again in a moment`);
          }
        }
        await pause(POLL_MS, signal);
      }
    },
  };
}
