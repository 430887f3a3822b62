import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { STREAMS } from '../../streams/definitions.ts';
import type { Db } from '../db/connect.ts';
import type { StoredEvent } from '../events/envelope.ts';
import type { JetcronEvent } from '../events/types.ts';
import type { Nats } from '../nats/connection.ts';
import { readEvents } from '../nats/event-reader.ts';
import { createLease, openLeaseBucket } from '../nats/lease.ts';
import { openSupervisor } from '../nats/supervisor.ts';
import { applyEachApart, PROJECTOR_NAME, readCheckpoint } from '../projections/projector.ts';

/**
 * A projection of the event log into tables of your own, for `jetcron replay` (or
 * `replayProjection` from code). Events arrive in stream order, in batches; each
 * batch is applied in the transaction that also moves the projection's checkpoint
 * (a row in `projection_checkpoints` named after it), so a crash or a stop replays
 * nothing twice and the next run goes on where this one stopped.
 */
export interface Projection {
  /** Names the checkpoint row and the lease: letters, digits, `_`; a new version takes a new name. */
  name: string;
  /** Creates the projection's tables when they are missing; runs before every replay. */
  setup(db: Kysely<any>): Promise<void>;
  /** Drops them: `--from-start` calls it, then `setup`, and replays the whole history. */
  teardown(db: Kysely<any>): Promise<void>;
  /** One batch of events in stream order (`JetcronEvent` is a tagged union: switch on `event.type`). */
  apply(events: StoredEvent<JetcronEvent>[], trx: Transaction<any>): Promise<void>;
}

/** Identity, for type checking a projection module's default export. */
export const defineProjection = (p: Projection): Projection => p;

const NAME = /^[a-z][a-z0-9_]{0,62}$/;
const LEASE_WAIT_MS = 10_000;

export interface ReplayResult {
  projection: string;
  /** Events applied by this run. */
  events: number;
  /** The EVENTS sequence the projection has reached. */
  last_seq: number;
  seconds: number;
}

/** Where a replay stands: `done` of the `total` events between its start and the log's end when it started. */
export interface ReplayProgress {
  done: number;
  total: number;
  /** Reached the end the log had at the start (once; a `follow` replay goes on after it). */
  caughtUp: boolean;
}

/**
 * Runs `projection` from its checkpoint (or, with `fromStart`, from the beginning of
 * the log) up to the last event stored when it started, or with `follow` until
 * `signal` aborts. One runner at a time per projection (a lease named after it).
 */
export async function replayProjection(
  deps: { nats: Nats; db: Db; log: (m: string) => void },
  projection: Projection,
  opts: { fromStart?: boolean; follow?: boolean; signal?: AbortSignal; onProgress?: (p: ReplayProgress) => void } = {},
): Promise<ReplayResult> {
  if (!NAME.test(projection.name) || projection.name === PROJECTOR_NAME) {
    throw new Error(`projection name "${projection.name}" must be lower-case letters, digits and _ (and not ${PROJECTOR_NAME})`);
  }
  const t0 = Date.now();
  const lease = createLease(await openLeaseBucket(deps.nats), `projection.${projection.name}`, `replay-${randomBytes(4).toString('hex')}`);
  try {
    await lease.acquire(AbortSignal.timeout(LEASE_WAIT_MS));
  } catch {
    throw new Error(`projection ${projection.name} is being replayed by another process`);
  }
  try {
    if (opts.fromStart) {
      await projection.teardown(deps.db);
      await sql`DELETE FROM projection_checkpoints WHERE name = ${projection.name}`.execute(deps.db);
    }
    await projection.setup(deps.db);
    const from = (await readCheckpoint(deps.db, projection.name)) + 1;
    const target = (await deps.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    let reached = from - 1;
    let applied = 0;
    const run = new AbortController();
    lease.onLost(() => run.abort());
    opts.signal?.addEventListener('abort', () => run.abort(), { once: true });
    if (opts.signal?.aborted) run.abort();
    const checkpointTo = (db: Db | Transaction<any>, seq: number) => sql`INSERT INTO projection_checkpoints (name, seq) VALUES (${projection.name}, ${seq})
      ON CONFLICT (name) DO UPDATE SET seq = GREATEST(projection_checkpoints.seq, EXCLUDED.seq), updated_at = now()`.execute(db);
    let caughtUp = false;
    const reachedSeq = (seq: number) => {
      reached = Math.max(reached, seq);
      const wasCaughtUp = caughtUp;
      caughtUp ||= reached >= target;
      if (!wasCaughtUp) opts.onProgress?.({ done: reached - from + 1, total: Math.max(0, target - from + 1), caughtUp });
      if (!opts.follow && reached >= target) run.abort();
    };
    reachedSeq(reached);
    // Events the projection fails on repeatedly are recorded (consumer `replay.<name>`) and skipped.
    const supervisor = await openSupervisor(deps.nats, deps.log);
    const read = {
      startSeq: from, maxBatch: 1000, countEvents: true, signal: run.signal, log: deps.log, name: `replay.${projection.name}`, supervisor,
      // Up to the end the log has now: read once as a range; a follower reads on with the process's tap.
      ...(opts.follow ? {} : { through: target, traceparents: true }),
      onSkip: async ({ seq }: { seq: number }) => {
        await checkpointTo(deps.db, seq);
        reachedSeq(seq);
      },
    };
    // A commit that keeps failing: its events that fail are recorded and skipped, the others applied.
    const applyApart = async (events: StoredEvent<JetcronEvent>[], skip: (e: StoredEvent<JetcronEvent>, err: unknown) => Promise<void>) => {
      let skipped = 0;
      await deps.db.transaction().execute(async (trx) => {
        await applyEachApart(trx, events, (e) => projection.apply([e], trx), (e, err) => skip(e, err).then(() => void skipped++));
        await checkpointTo(trx, events[0]!.seq);
      });
      applied += events.length - skipped;
      reachedSeq(events[0]!.seq);
    };
    const reading = readEvents(deps.nats, { ...read, applyApart }, async (batch) => {
      const last = batch[batch.length - 1]!.seq;
      await deps.db.transaction().execute(async (trx) => {
        await projection.apply(batch, trx);
        await checkpointTo(trx, last);
      });
      applied += batch.length;
      reachedSeq(last);
    });
    const readThrough = await reading.finally(() => supervisor.close());
    if (readThrough && reached < target) {
      // The range's last messages were deleted: nothing more to apply up to its end.
      await checkpointTo(deps.db, target);
      reachedSeq(target);
    }
    if (!opts.follow && reached < target && !opts.signal?.aborted) throw new Error(`lost the lease of projection ${projection.name} at seq ${reached}; run it again`);
    return { projection: projection.name, events: applied, last_seq: reached, seconds: (Date.now() - t0) / 1000 };
  } finally {
    await lease.release();
  }
}
