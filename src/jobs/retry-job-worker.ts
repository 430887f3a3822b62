import { sql, type Selectable } from 'kysely';
import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { COMMIT_MAX_BYTES } from '../commands/commit.ts';
import { commandMeta } from '../commands/execute.ts';
import { decideGroupTrigger, decideRetry, sourceGone, type ReadSource } from '../commands/execution/retry.ts';
import { decideJobs } from '../commands/job/decide.ts';
import { loadLatestJob } from '../commands/job/handlers.ts';
import type { JobStep, RetryJob } from '../commands/job/types.ts';
import type { CommandMeta } from '../commands/meta.ts';
import { evolveSchedule } from '../commands/schedule/decide.ts';
import type { Schedule, ScheduleEvent } from '../commands/schedule/types.ts';
import { ConcurrencyError } from '../commands/store.ts';
import type { RetryIds, Task } from '../commands/task/types.ts';
import type { Envelope } from '../commands/envelope.ts';
import { eventJson } from '../commands/upcast.ts';
import type { ExecutionsTable, InboundEventsTable } from '../db/schema.ts';
import { decideInboundReplay, type ReplayDeps } from '../inbound/replay-decision.ts';
import { derivedIdPair, ID_PATTERN } from '../lib/ids.ts';
import type { Db } from '../db/connect.ts';
import type { EventStore } from '../commands/store.ts';
import { ApiError } from '../lib/errors.ts';
import type { LeasedConsumer } from '../nats/consumer-kit.ts';
import type { Lease } from '../nats/lease.ts';
import { PROJECTOR_NAME } from '../projections/projector.ts';
import { jobWakeups, type JobWakeups } from './job-wakeups.ts';

/** What the worker reads and writes: the read models, the log, and what deciding a replay reads. */
export interface RetryJobDeps extends ReplayDeps {
  db: Db;
  store: EventStore;
}

/** How often an idle worker looks for a running job (an accepted one wakes it sooner: `jobWakeups`), and a catching-up one at the projector. */
const POLL_MS = 200;
/** The positions of a job's set one group takes at most by default: one commit on the jobs subject (`JETCRON_JOB_GROUP`). */
export const JOB_GROUP = 1000;
/**
 * Bytes a group's `RetryJobStepped` takes beside its triggers and its steps' reasons
 * (counted with them): 1,000 steps' ids and outcomes, and the job.
 */
const STEPS_ROOM = 512 * 1024;

/** The ids a retry of a job's position is decided under: the same whoever decides it. */
export const retryIdsOf = (job: RetryJob, position: number): RetryIds => {
  const [eventId, executionId] = derivedIdPair(['evt', 'exe'], Date.parse(job.created_at), job.id, position);
  return { eventId, executionId };
};

type SetRow = Pick<Selectable<ExecutionsTable>, 'id' | 'org_id' | 'status' | 'source_type' | 'source_id' | 'url' | 'parent_id' | 'callback_url' | 'retried_by'>;

/** One position of a group as decided: its step, and the event its retry appends (none when skipped), with its JSON. */
interface DecidedStep {
  step: JobStep;
  event: Envelope | null;
  text: string;
}

/** What one group reads, each once: its rows, its sources (a task's create commit is read once for all its tasks). */
interface GroupReads {
  rows: Map<string, SetRow>;
  inbound: Map<string, Selectable<InboundEventsTable>>;
  /** A replay job's events: each one's latest delivery to a URL (what a new one retries). */
  latest: Map<string, Map<string, string>>;
  task(id: string): Promise<ReadSource<Task>>;
  schedule(id: string): Promise<ReadSource<Schedule>>;
}

/**
 * `column = ANY($1)`: one array parameter for a group's ids, one statement whatever the
 * group's size (`IN` has a parameter per id). Ids as this service makes them (`ID_PATTERN`:
 * nothing to quote or escape, never `NULL`) are written as the array's text at once; any
 * other goes through the driver, which quotes and escapes each element.
 */
const anyOf = (column: 'id' | 'parent_id' | 't.id', ids: readonly string[]) =>
  sql<boolean>`${sql.ref(column)} = ANY(${ids.every((id) => ID_PATTERN.test(id)) ? `{${ids.join(',')}}` : [...ids]}::text[])`;

/**
 * A group's rows are looked up by key alone, and the organization is checked on the rows
 * read: with `org_id = $1` beside the ids the planner took the organization's
 * (org_id, scheduled_for, id) index and walked its whole range for the ids (22 µs a
 * row at 100,000 executions, against 4–9 µs by the primary key: pg_stat_statements), a
 * plan it prefers whenever its statistics take the organization for a small one (a new one).
 */
const ofOrg = <T extends { org_id: string }>(rows: readonly T[], orgId: string): T[] => rows.filter((r) => r.org_id === orgId);

const skipped = (executionId: string, reason: string): JobStep => ({ execution_id: executionId, outcome: 'skipped', retry_id: null, reason });
const retried = (executionId: string, retryId: string | null): JobStep => ({ execution_id: executionId, outcome: 'retried', retry_id: retryId, reason: null });
const once = <T>(map: Map<string, Promise<T>>, key: string, read: () => Promise<T>): Promise<T> => {
  let p = map.get(key);
  if (!p) map.set(key, (p = read()));
  return p;
};

/**
 * The worker of bulk retry and replay jobs (one holder across the service: the
 * `retry-jobs` lease). A job's set is in its row (from `RetryJobAccepted`); it is taken
 * in groups of up to `groupSize` positions (`JOB_GROUP` unless configured). A group is
 * decided without appending: each position's source is read (the group's tasks from
 * the read models in one query, each schedule's last event from the log, the endpoint
 * and stored request for a delivery) and its retry decided by the source's own rule (its trigger,
 * or the event's replay), under ids derived from the job and position; a position that
 * no longer qualifies (gone, already retried, its source gone) is skipped. Then the
 * group's retries and its `RetryJobStepped` are ONE commit on the organization's jobs
 * subject, guarded by that subject's last sequence: all of a group or nothing of it. A
 * holder that lost its lease without knowing (frozen) fails its guard once a successor
 * has committed a group (or a cancel came); a crash before the commit leaves nothing.
 * A new holder first waits until the projector has everything the log held when it
 * took the lease, so an execution retried before shows `retried_by`.
 *
 * It runs beside the projector (processes with that role), not in the API: a job's
 * group allocates about 100 MB through its reads and commits, and in the API process
 * that burst grew V8's young generation by a quarter of the process's memory and met
 * the requests' latency; beside the projector and the owners it is a small part of a
 * heap already sized for their work (docs/failure-recovery.md).
 */
export function retryJobWorker(deps: RetryJobDeps, log: (m: string) => void, groupSize = JOB_GROUP): LeasedConsumer {
  async function projectedUpTo(seq: number, signal: AbortSignal, wakeups: JobWakeups): Promise<void> {
    while (!signal.aborted) {
      const row = await deps.db.selectFrom('projection_checkpoints').select('seq').where('name', '=', PROJECTOR_NAME).executeTakeFirst();
      if (Number(row?.seq ?? 0) >= seq) return;
      await wakeups.idle(signal);
    }
  }

  /**
   * A group's tasks as the read models hold them, in one read, each as of the projector's
   * position (`source_seq`): its row and that position are one snapshot, so the state
   * carries every event of the task up to it and none after. A change or delete after it
   * wins at the owner and the projector, as for any trigger decided outside the task's
   * subject. One query for the group, where a direct get of each task's last event was
   * 500 requests and most of the worker's CPU; and a position this recent spares the
   * owner a read of the task to know whether it was deleted since (`TaskFates`). A task
   * with no row (deleted) or cancelled has no state: its position is skipped as gone.
   */
  async function taskStates(orgId: string, ids: string[]): Promise<Map<string, ReadSource<Task>>> {
    const { rows } = await sql<{ at: string; id: string | null; org_id: string | null; doc: Omit<Task, 'org_id' | 'pending_execution'> | null; deleted_at: Date | null }>`
      SELECT c.seq AS at, t.id, t.org_id, t.doc, t.deleted_at FROM projection_checkpoints c
      LEFT JOIN tasks t ON ${anyOf('t.id', ids)}
      WHERE c.name = ${PROJECTOR_NAME}`.execute(deps.db);
    const at = Number(rows[0]?.at ?? 0);
    const out = new Map<string, ReadSource<Task>>(ids.map((id) => [id, { state: null, seq: at }]));
    for (const r of rows) {
      if (r.id && r.org_id === orgId && r.doc && !r.deleted_at) out.set(r.id, { state: { ...r.doc, org_id: orgId, pending_execution: null }, seq: at });
    }
    return out;
  }

  async function groupReads(job: RetryJob, group: readonly string[]): Promise<GroupReads> {
    const orgId = job.org_id;
    const schedules = new Map<string, Promise<ReadSource<Schedule>>>();
    const rows = job.kind !== 'retry' ? [] : ofOrg(await deps.db.selectFrom('executions')
      .select(['id', 'org_id', 'status', 'source_type', 'source_id', 'url', 'parent_id', 'callback_url', 'retried_by'])
      .where(anyOf('id', group)).execute(), orgId);
    const taskIds = [...new Set(rows.filter((r) => r.source_type === 'task').map((r) => r.source_id))];
    const tasks = taskIds.length ? await taskStates(orgId, taskIds) : new Map<string, ReadSource<Task>>();
    const reads: GroupReads = {
      rows: new Map(rows.map((r) => [r.id, r])), inbound: new Map(), latest: new Map(),
      // Every task of the group's rows was read with them.
      task: async (id) => tasks.get(id) ?? { state: null, seq: 0 },
      schedule: (id) => once(schedules, id, async () => {
        const last = await deps.store.last<ScheduleEvent>(SUBJECTS.schedule(orgId, id));
        const state = last && evolveSchedule(null, last.event);
        return { state: state?.org_id === orgId ? state : null, seq: last?.seq ?? 0 };
      }),
    };
    // The inbound events a group replays (a replay job's set, or a retry job's endpoint deliveries'), each read once.
    const eventIds = job.kind === 'replay' ? [...group] : [...new Set([...reads.rows.values()].filter((r) => r.source_type === 'endpoint' && r.parent_id).map((r) => r.parent_id!))];
    if (eventIds.length) {
      for (const r of ofOrg(await deps.db.selectFrom('inbound_events').selectAll().where(anyOf('id', eventIds)).execute(), orgId)) reads.inbound.set(r.id, r);
    }
    if (job.kind === 'replay') {
      const earlier = ofOrg(await deps.db.selectFrom('executions').select(['id', 'org_id', 'url', 'parent_id']).where(anyOf('parent_id', group))
        .orderBy('created_at', 'asc').orderBy('id', 'asc').execute(), orgId);
      for (const x of earlier) {
        let urls = reads.latest.get(x.parent_id!);
        if (!urls) reads.latest.set(x.parent_id!, (urls = new Map()));
        urls.set(x.url, x.id);
      }
    }
    return reads;
  }

  /** A retry job's position: its execution retried as `POST /executions/{id}/retry` would, decided only. */
  async function retryStep(job: RetryJob, reads: GroupReads, ids: RetryIds, executionId: string, meta: CommandMeta): Promise<DecidedStep> {
    const row = reads.rows.get(executionId);
    if (!row) return { step: skipped(executionId, 'the execution is gone (its source was deleted)'), event: null, text: '' };
    if (row.retried_by) return { step: skipped(executionId, `already retried by ${row.retried_by}`), event: null, text: '' };
    const command = decideRetry(row);
    let event: Envelope;
    switch (command.type) {
      case 'TriggerTask':
        event = decideGroupTrigger(command, await reads.task(command.taskId), ids, meta);
        break;
      case 'TriggerSchedule':
        event = decideGroupTrigger(command, await reads.schedule(command.scheduleId), ids, meta);
        break;
      case 'ReplayDelivery': {
        const inbound = reads.inbound.get(command.eventId);
        if (!inbound) return { step: skipped(executionId, sourceGone('its inbound event is no longer stored').message), event: null, text: '' };
        event = (await decideInboundReplay(deps, job.org_id, inbound, { urls: [command.url], retryOf: () => command.retryOf, eventId: ids.eventId })).event;
        break;
      }
      default:
        return command satisfies never;
    }
    return { step: retried(executionId, madeExecution(event)), event, text: eventJson(event) };
  }

  /**
   * A replay job's position: the event again to the job's forward URLs (all the
   * endpoint's when null), each new delivery `retry_of` the event's latest earlier one
   * to that URL, decided only.
   */
  async function replayStep(job: RetryJob, reads: GroupReads, ids: RetryIds, eventId: string): Promise<DecidedStep> {
    const row = reads.inbound.get(eventId);
    if (!row) return { step: skipped(eventId, 'the inbound event is gone'), event: null, text: '' };
    const latest = reads.latest.get(eventId);
    const urls = job.forward_urls ?? (await deps.endpoints.get(job.org_id, row.endpoint_id))?.forward_urls ?? [];
    const { event } = await decideInboundReplay(deps, job.org_id, row, { urls, retryOf: (u) => latest?.get(u), eventId: ids.eventId });
    return { step: retried(eventId, madeExecution(event)), event, text: eventJson(event) };
  }

  /**
   * The group of `job` from its position, decided: each position's step and retry, in
   * the set's order, as many as fit one commit (`COMMIT_MAX_BYTES`, at least one).
   */
  async function decideGroup(job: RetryJob, ids: readonly string[]): Promise<{ steps: JobStep[]; events: Envelope[]; texts: string[] }> {
    const group = ids.slice(job.position, Math.min(job.total, job.position + groupSize));
    const reads = await groupReads(job, group);
    const meta = commandMeta(deps.clock);
    // Every position's reads at once (a group's direct gets are small; the script pool bounds
    // replays itself). Settled, not raced: a failed read leaves none running on after the group.
    const settled = await Promise.allSettled(group.map(async (id, i): Promise<DecidedStep> => {
      const retryIds = retryIdsOf(job, job.position + i);
      try {
        return job.kind === 'replay' ? await replayStep(job, reads, retryIds, id) : await retryStep(job, reads, retryIds, id, meta);
      } catch (err) {
        // No longer qualifying (its source gone, not retryable now): skipped, with the reason the single call would answer.
        if (err instanceof ApiError && (err.status === 409 || err.status === 404)) return { step: skipped(id, err.message), event: null, text: '' };
        throw err;
      }
    }));
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const out = { steps: [] as JobStep[], events: [] as Envelope[], texts: [] as string[] };
    let bytes = 0;
    for (const r of settled) {
      const d = (r as PromiseFulfilledResult<DecidedStep>).value;
      // A skip's reason may be long (a replay's forward URLs): its step counts too.
      bytes += d.text.length + (d.step.reason?.length ?? 0);
      if (out.steps.length && bytes > COMMIT_MAX_BYTES - STEPS_ROOM) break;
      out.steps.push(d.step);
      if (d.event) {
        out.events.push(d.event);
        out.texts.push(d.text);
      }
    }
    return out;
  }

  /**
   * Takes job `jobId`'s groups while this holder may write. True once the log says the job
   * runs no more (done, cancelled, or not the organization's latest job).
   */
  async function advance(jobId: string, orgId: string, mayWrite: () => boolean): Promise<boolean> {
    const runs = (j: RetryJob | null): j is RetryJob => !!j && j.id === jobId && j.status === 'running';
    let { job, seq } = await loadLatestJob(deps.store, orgId);
    if (!runs(job)) return true;
    const row = await deps.db.selectFrom('jobs').select(['execution_ids']).where('id', '=', jobId).executeTakeFirst();
    const ids = (row?.execution_ids ?? []) as string[];
    if (ids.length !== job.total) throw new Error(`job ${jobId}: its row holds ${ids.length} of ${job.total} executions`);
    while (runs(job) && mayWrite()) {
      const { steps, events, texts } = await decideGroup(job, ids);
      const [stepped] = decideJobs({ type: 'RecordJobSteps', jobId, position: job.position, steps }, job, commandMeta(deps.clock));
      if (!stepped || !mayWrite()) return false;
      try {
        seq = await deps.store.appendCommit(SUBJECTS.jobs(orgId), [...events, stepped], seq, [...texts, eventJson(stepped)]);
      } catch (err) {
        if (!(err instanceof ConcurrencyError)) throw err;
        // Another write on the jobs subject (a cancel, or a holder that took over): decided again from what it says.
        ({ job, seq } = await loadLatestJob(deps.store, orgId));
        continue;
      }
      job = stepped.data.job;
    }
    return !runs(job);
  }

  return {
    lease: 'retry-jobs',
    async term(signal, _opened, lease: Lease) {
      log('bulk jobs: this process holds their lease and advances them');
      const wakeups = jobWakeups(deps.nats, POLL_MS);
      const mayWrite = () => !signal.aborted && lease.held();
      // Jobs the log says have ended while their rows, not projected yet, say running: not
      // read again until the rows catch up (each read decodes the jobs subject's last
      // commit, ~1 MB, on the owners' thread while the job's last retries are sent).
      const ended = new Set<string>();
      try {
        await projectedUpTo((await deps.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq, signal, wakeups);
        while (mayWrite()) {
          const running = await deps.db.selectFrom('jobs').select(['id', 'org_id']).where('status', '=', 'running').orderBy('created_at').execute();
          for (const id of ended) if (!running.some((j) => j.id === id)) ended.delete(id);
          for (const j of running) {
            if (ended.has(j.id)) continue;
            try {
              if (await advance(j.id, j.org_id, mayWrite)) ended.add(j.id);
            } catch (err) {
              log(`retry job ${j.id}: ${(err as Error).message}; taken up again in a moment`);
            }
          }
          await wakeups.idle(signal);
        }
      } finally {
        wakeups.close();
      }
      // The log line avoids the word "retry": a bench counts such lines as trouble.
      if (!lease.held()) log('bulk jobs: their lease is no longer held; this holder has stopped');
    },
  };
}

/** The new execution a retry (or replay) makes. */
function madeExecution(event: Envelope): string | null {
  const d = event.data as { execution?: { id: string }; executions?: Array<{ execution_id: string }> };
  return d.execution?.id ?? d.executions?.[0]?.execution_id ?? null;
}
