import { sql, type Transaction } from 'kysely';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { Db } from '../db/connect.ts';
import type { Database } from '../db/schema.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { isTransient } from '../lib/transient.ts';
import type { Nats } from '../nats/connection.ts';
import { readEvents } from '../nats/event-reader.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { applyEvent } from './apply-event.ts';
import { ProjectionBatch, type Statement, type StatementOptions } from './batch.ts';
import { isUniqueViolation } from './bulk-write.ts';
import { openSpan, SpanKind, tracingOn, type SpanScope } from '../telemetry/tracing.ts';

export const PROJECTOR_NAME = 'read_models_v1';
export const PROJECTOR_LEASE = 'projector';
const PRUNE_EVERY_MS = 3_600_000;

export async function readCheckpoint(db: Db, name = PROJECTOR_NAME): Promise<number> {
  const row = await db.selectFrom('projection_checkpoints').select('seq').where('name', '=', name).executeTakeFirst();
  return row ? Number(row.seq) : 0;
}

/**
 * Events per transaction at most. A projector that keeps up commits what has arrived
 * (often a few events, every few milliseconds); one that is behind commits this many
 * at once, which costs fewer statements and merges more changes of one row in memory.
 */
export const LIVE_BATCH = 2000;

export interface ProjectionOptions {
  maxBatch?: number;
  /**
   * Prepare the next batch (decode, merge, encode its statements) while Postgres
   * commits the current one; for a rebuild. A failed commit ends the pipelined read at
   * the last committed batch; from there the failed batch goes through one commit at
   * a time, where the reader isolates (and records) an event at fault.
   */
  pipelined?: boolean;
  /**
   * The rows a batch creates go in by COPY (`StatementOptions.copyCreated`), unless
   * false. A row a batch creates exists already only when an event is read again (a
   * retried record, a tick appended twice): a commit refused for that (a unique
   * violation) goes again at once through upserts; one refused otherwise in a pipelined
   * read goes again through upserts with the careful batches above. About a fifth less
   * of Postgres's CPU per job than upserts at 100 jobs a transaction
   * (`bench/projector-batches.ts`).
   */
  copyCreated?: boolean;
  /**
   * Project the log through this sequence, read once as a range (`readRange`), then
   * return with the checkpoint there; for a rebuild. Without it: until the signal aborts.
   */
  through?: number;
}


/** Postgres no longer has commits this process made: it lost them (a crash while synchronous_commit was off). */
export class LostCommits extends Error {}

/** Moves the checkpoint to `seq` (never back). */
export const writeCheckpoint = async (db: Db, seq: number) => {
  await sql`INSERT INTO projection_checkpoints (name, seq) VALUES (${PROJECTOR_NAME}, ${seq})
    ON CONFLICT (name) DO UPDATE SET seq = GREATEST(projection_checkpoints.seq, EXCLUDED.seq), updated_at = now()`.execute(db);
};

/**
 * Commits one batch: its writes and the checkpoint `last` in one transaction, then says
 * so on the projected subject. `committed` is what this process committed before: a
 * checkpoint found lower means Postgres lost commits (LostCommits, nothing written).
 */
export function batchCommitter(deps: { db: Db; nats: Nats; log: (m: string) => void }) {
  let prunedAt = 0;
  return async (write: Write, last: number, committed: number): Promise<void> => {
    await deps.db.transaction().execute(async (trx) => {
      // The log is the source of truth: no fsync wait per commit. A commit Postgres
      // loses in a crash is found missing here, and projected again.
      const { rows } = await sql<{ seq: string | null }>`SELECT set_config('synchronous_commit', 'off', true),
        (SELECT seq FROM projection_checkpoints WHERE name = ${PROJECTOR_NAME}) AS seq`.execute(trx);
      if (Number(rows[0]?.seq ?? 0) < committed) {
        deps.log(`projector: the read models lost commits past seq ${rows[0]?.seq ?? 0} (Postgres restarted?); projecting again from there`);
        throw new LostCommits();
      }
      await write(trx);
      // INBOUND forgets requests after 30 days (its max_age); their rows follow, at most hourly.
      if (Date.now() - prunedAt > PRUNE_EVERY_MS) {
        await sql`DELETE FROM inbound_events WHERE received_at < now() - interval '30 days'`.execute(trx);
        prunedAt = Date.now();
      }
      await writeCheckpoint(trx, last);
    });
    deps.nats.nc.publish(SUBJECTS.projected, String(last));
  };
}

function prepare(events: StoredEvent<JetcronEvent>[], opts?: StatementOptions) {
  const batch = new ProjectionBatch();
  for (const e of events) applyEvent(batch, e.event);
  return batch.statements(opts);
}

export type Write = (trx: Transaction<Database>) => Promise<void>;

export const writeAll = (statements: Statement[]): Write => async (trx) => {
  for (const statement of statements) await statement.execute(trx);
};

/**
 * A commit's events one at a time in `trx`, each under a savepoint of its own: an event
 * that fails (not transiently: then the whole transaction fails and is tried again) is
 * rolled back to its savepoint and handed to `skip`, which records it; the others stay.
 */
export async function applyEachApart<E>(
  trx: Transaction<any>,
  events: E[],
  apply: (event: E) => Promise<void>,
  skip: (event: E, err: unknown) => Promise<void>,
): Promise<void> {
  for (const e of events) {
    await sql`SAVEPOINT apart`.execute(trx);
    try {
      await apply(e);
      await sql`RELEASE SAVEPOINT apart`.execute(trx);
    } catch (err) {
      if (isTransient(err)) throw err;
      await sql`ROLLBACK TO SAVEPOINT apart`.execute(trx);
      await skip(e, err);
    }
  }
}

/**
 * One CONSUMER span per traced event of a batch (its trace's last step: the read models
 * show it once the batch commits), ended with the commit. None while tracing is off.
 */
function projectionSpans(events: StoredEvent<JetcronEvent>[]): SpanScope[] {
  if (!tracingOn()) return [];
  return events.map((e) => openSpan(`project ${e.event.type}`, {
    kind: SpanKind.CONSUMER, traceparent: e.traceparent, continueOnly: true,
    attributes: () => ({ 'jetcron.org_id': e.event.org_id, 'jetcron.event_id': e.event.id, 'jetcron.seq': e.seq }),
  }));
}
const endSpans = (spans: SpanScope[]) => {
  for (const s of spans) s.end();
};

/** Projects from the checkpoint until `signal` aborts; the caller holds the projector lease. */
export async function runProjection(deps: ProjectorDeps, signal: AbortSignal, opts: ProjectionOptions = {}): Promise<void> {
  const commitBatch = batchCommitter(deps);
  // Batches up to here go one commit at a time (a pipelined commit of theirs failed).
  let carefulThrough = 0;
  while (!signal.aborted) {
    const from = (await readCheckpoint(deps.db)) + 1;
    // What this process has committed: a checkpoint found lower means Postgres lost commits.
    let committed = from - 1;
    const round = new AbortController();
    const stop = () => round.abort();
    signal.addEventListener('abort', stop, { once: true });
    // Aborted while the checkpoint was read: the listener came too late to fire.
    if (signal.aborted) round.abort();
    const commit = async (write: Write, last: number) => {
      await commitBatch(write, last, committed).catch((err: unknown) => {
        if (err instanceof LostCommits) round.abort();
        throw err;
      });
      committed = Math.max(committed, last);
    };
    let writing: Promise<void> = Promise.resolve();
    let failed: { err: unknown; last: number } | undefined;
    const read = {
      startSeq: from, maxBatch: opts.maxBatch ?? LIVE_BATCH, signal: round.signal, log: deps.log, name: PROJECTOR_LEASE, supervisor: deps.supervisor,
      through: opts.through, traceparents: tracingOn(), countEvents: true,
      // A skipped (recorded) event: the read models move past it, and writers waiting for it are released.
      onSkip: async ({ seq }: { seq: number }) => {
        await writing;
        await writeCheckpoint(deps.db, seq);
        committed = Math.max(committed, seq);
        deps.nats.nc.publish(SUBJECTS.projected, String(seq));
      },
      // A retry: the events of the record (one, for an event of a commit); the checkpoint is past them already.
      reapply: async (events: StoredEvent<JetcronEvent>[]) => {
        await writing;
        await commit(writeAll(prepare(events)), events[0]!.seq);
      },
      // A commit that failed alone: its events that fail are recorded and left out, the rest land with the checkpoint.
      applyApart: async (events: StoredEvent<JetcronEvent>[], skip: (event: StoredEvent<JetcronEvent>, err: unknown) => Promise<void>) => {
        await writing;
        const spans = projectionSpans(events);
        await commit((trx) => applyEachApart(trx, events, (e) => writeAll(prepare([e]))(trx), skip), events[0]!.seq).finally(() => endSpans(spans));
      },
    };
    const readThrough = await readEvents(deps.nats, read, async (events) => {
      const careful = events[0]!.seq <= carefulThrough;
      const copy = opts.copyCreated !== false && !careful;
      const statements = writeAll(prepare(events, { copyCreated: copy }));
      const last = events[events.length - 1]!.seq;
      const spans = projectionSpans(events);
      await writing;
      if (round.signal.aborted) return endSpans(spans);
      if (!opts.pipelined || careful) {
        return commit(statements, last)
          .catch((err: unknown) => {
            if (!copy || !isUniqueViolation(err)) throw err;
            return commit(writeAll(prepare(events)), last);
          })
          .finally(() => endSpans(spans));
      }
      writing = commit(statements, last).finally(() => endSpans(spans)).catch((err: unknown) => {
        failed = { err, last };
        round.abort();
      });
    });
    await writing;
    signal.removeEventListener('abort', stop);
    if (readThrough && !failed) {
      // Everything through the range's end is projected, its deleted messages too.
      await writeCheckpoint(deps.db, opts.through!);
      return;
    }
    if (!failed || failed.err instanceof LostCommits || signal.aborted) continue;
    if (isTransient(failed.err)) {
      deps.log(`projector: a pipelined commit failed (${(failed.err as Error).message}); going on from the checkpoint`);
      await new Promise((r) => setTimeout(r, 500));
    } else {
      deps.log(`projector: a pipelined commit through seq ${failed.last} failed (${(failed.err as Error).message}); going on from the checkpoint one batch at a time through seq ${failed.last}`);
      carefulThrough = failed.last;
    }
  }
}

/**
 * Projects EVENTS into the Postgres read models. One active projector at a time
 * (a KV lease) reads in stream order from the checkpoint kept in Postgres; each
 * batch and its checkpoint commit in one transaction, so a crash replays at most
 * the uncommitted batch and replays change nothing (rows are upserts of state).
 */
export interface ProjectorDeps {
  nats: Nats;
  db: Db;
  log: (m: string) => void;
  supervisor: Supervisor;
}

export function startProjector(deps: ProjectorDeps & { owner: string }) {
  return startConsumers(deps, [{ lease: PROJECTOR_LEASE, term: (signal) => runProjection(deps, signal) }]);
}
