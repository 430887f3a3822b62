import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { STREAMS } from '../../streams/definitions.ts';
import { connectDb, type Db } from '../db/connect.ts';
import { eventsOf } from '../commands/commit.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { CommandError } from '../lib/errors.ts';
import { isTransient, describeError } from '../lib/transient.ts';
import type { Nats } from '../nats/connection.ts';
import { failedEventOf, readStream, type StreamItem } from '../nats/event-reader.ts';
import { createLease, openLeaseBucket } from '../nats/lease.ts';
import { openSupervisor, type Supervisor } from '../nats/supervisor.ts';
import { applyEachApart, PROJECTOR_NAME } from '../projections/projector.ts';
import { applySkippedAgain, forgetSkipped } from './retries.ts';
import { eventFilter, filterKey, messagePrefilter, type Selection } from './selection.ts';
import { subjectFilterOf } from '../commands/catalogue.ts';
import { firstSeqSince } from './since.ts';
import { DEFAULT_SCHEMA } from './usage.ts';

/**
 * A projection of the event log into tables of your own, for `jetcron replay` (or
 * `replayProjection` from code). Events arrive in stream order, in batches, in today's
 * shapes (src/commands/upcast.ts); each batch is applied in the transaction that also
 * moves the projection's checkpoint, so a crash or a stop replays nothing twice and the
 * next run goes on where this one stopped. Its tables and its checkpoint live in its
 * own Postgres schema (default `analytics`): `db` and `trx` have it as `search_path`,
 * so its SQL names tables unqualified, and a rebuild of the service's read models
 * never touches them.
 */
export interface Projection {
  /** Names the checkpoint row and the lease: lower-case letters, digits, `_`; a new version takes a new name. */
  name: string;
  /** Creates the projection's tables when they are missing; runs before every replay. */
  setup(db: Kysely<any>): Promise<void>;
  /** Drops them: `--from-start` calls it, then `setup`, and replays the selected history. */
  teardown(db: Kysely<any>): Promise<void>;
  /** One batch of events in stream order (`JetcronEvent` is a tagged union: switch on `event.type`). */
  apply(events: StoredEvent<JetcronEvent>[], trx: Transaction<any>): Promise<void>;
}

/** Identity, for type checking a projection module's default export. */
export const defineProjection = (p: Projection): Projection => p;

const NAME = /^[a-z][a-z0-9_]{0,62}$/;
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const LEASE_WAIT_MS = 10_000;
/** A batch without a selected event moves the checkpoint at most this often (one write per batch would be most of a filtered replay's cost). */
const IDLE_CHECKPOINT_MS = 1_000;
const CHECKPOINTS = 'jetcron_checkpoints';

export interface ReplayResult {
  projection: string;
  /** Events applied by this run. */
  events: number;
  /** Events this run could not apply (recorded in KV failures; the next plain replay tries them again). */
  skipped: number;
  /** The EVENTS sequence the projection has reached. */
  last_seq: number;
  seconds: number;
  /** `strict`: the event the projection threw on, where the replay stopped (the checkpoint is before its message). */
  stopped_at?: { seq: number; index: number; id: string; type: string; error: string };
}

/** Where a replay stands: `done` of the `total` messages between its start and the log's end when it started. */
export interface ReplayProgress {
  done: number;
  total: number;
  /** Reached the end the log had at the start (once; a `follow` replay goes on after it). */
  caughtUp: boolean;
}

export interface ReplayOptions {
  /** Tear the tables down and start again at the selection's start (else: on from the checkpoint). */
  fromStart?: boolean;
  follow?: boolean;
  signal?: AbortSignal;
  onProgress?: (p: ReplayProgress) => void;
  selection?: Selection;
  /** Stop at the first event the projection throws on (not retried, not skipped). */
  strict?: boolean;
  /** The projection's Postgres schema (default `analytics`). */
  schema?: string;
}

export class ReplayRefused extends CommandError {}

/** A selected event of a message, and its place in it. */
export interface Picked {
  event: JetcronEvent;
  index: number;
}

/** A URL whose connections use `schema` for unqualified names (and nothing else). */
function withSearchPath(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.href;
}

/**
 * Runs `projection` from its checkpoint (or, with `fromStart`, from the selection's
 * start) up to the last event stored when it started, or with `follow` until `signal`
 * aborts. One runner at a time per projection and schema (a lease named after both).
 */
export async function replayProjection(
  deps: { nats: Nats; db: Db; databaseUrl: string; log: (m: string) => void },
  projection: Projection,
  opts: ReplayOptions = {},
): Promise<ReplayResult> {
  if (!NAME.test(projection.name) || projection.name === PROJECTOR_NAME) {
    throw new ReplayRefused(`projection name "${projection.name}" must be lower-case letters, digits and _ (and not ${PROJECTOR_NAME})`);
  }
  const schema = opts.schema ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema)) throw new ReplayRefused(`schema "${schema}" must be lower-case letters, digits and _`);
  const serviceSchema = (await sql<{ s: string }>`SELECT current_schema() AS s`.execute(deps.db)).rows[0]?.s;
  if (schema === serviceSchema || schema === 'public' || schema.startsWith('pg_')) {
    throw new ReplayRefused(`schema "${schema}" holds the service's read models (or Postgres's own): a projection's tables live in a schema of their own`);
  }
  const selection = opts.selection ?? {};
  const t0 = Date.now();
  const lease = createLease(await openLeaseBucket(deps.nats), `projection.${schema}.${projection.name}`, `replay-${randomBytes(4).toString('hex')}`);
  try {
    await lease.acquire(AbortSignal.timeout(LEASE_WAIT_MS));
  } catch {
    throw new ReplayRefused(`projection ${projection.name} (schema ${schema}) is being replayed by another process`);
  }
  await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(schema)}`.execute(deps.db);
  const { db } = connectDb(withSearchPath(deps.databaseUrl, schema), 4);
  const consumer = `replay.${schema}.${projection.name}`;
  const supervisor = await openSupervisor(deps.nats, deps.log);
  try {
    await sql`CREATE TABLE IF NOT EXISTS ${sql.id(CHECKPOINTS)} (name text PRIMARY KEY, seq bigint NOT NULL, filters text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`.execute(db);
    const filters = filterKey(selection);
    if (opts.fromStart) {
      await projection.teardown(db);
      await sql`DELETE FROM ${sql.id(CHECKPOINTS)} WHERE name = ${projection.name}`.execute(db);
      await forgetSkipped(deps.nats, consumer);
    }
    await projection.setup(db);
    const saved = (await sql<{ seq: string; filters: string }>`SELECT seq, filters FROM ${sql.id(CHECKPOINTS)} WHERE name = ${projection.name}`.execute(db)).rows[0];
    if (saved && saved.filters !== filters) {
      throw new ReplayRefused(`projection ${projection.name} was replayed with other --types/--org (${saved.filters}); use the same, or --from-start to start it again with these`);
    }
    const checkpointTo = (on: Kysely<any>, seq: number) => sql`INSERT INTO ${sql.id(CHECKPOINTS)} (name, seq, filters) VALUES (${projection.name}, ${seq}, ${filters})
      ON CONFLICT (name) DO UPDATE SET seq = GREATEST(${sql.id(CHECKPOINTS)}.seq, EXCLUDED.seq), updated_at = now()`.execute(on);

    const keep = eventFilter(selection);
    const maybe = messagePrefilter(selection);
    // Each selected event with its place in its message (what failure records and retries name).
    const decode = (data: Uint8Array): Picked[] => {
      if (maybe && !maybe(data)) return [];
      const events = eventsOf<JetcronEvent>(JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')));
      const picked = events.map((event, index) => ({ event, index }));
      return keep ? picked.filter((p) => keep(p.event)) : picked;
    };
    const flatten = (items: StreamItem<Picked[]>[]): StoredEvent<JetcronEvent>[] =>
      items.flatMap((item) => item.event.map(({ event, index }) => ({ event, seq: item.seq, subject: item.subject, index })));

    let applied = 0;
    let skipped = 0;
    let stoppedAt: ReplayResult['stopped_at'];
    const run = new AbortController();
    lease.onLost(() => run.abort());
    opts.signal?.addEventListener('abort', () => run.abort(), { once: true });
    if (opts.signal?.aborted) run.abort();

    // The events skipped by earlier runs first: they come before everything not read yet.
    const again = await applySkippedAgain({ nats: deps.nats, consumer, decode, log: deps.log }, async (events) => {
      await db.transaction().execute((trx) => projection.apply(events, trx));
      applied += events.length;
    }, opts.strict);
    skipped += again.skipped;
    if (again.stoppedAt) stoppedAt = again.stoppedAt;

    const checkpoint = saved ? Number(saved.seq) : 0;
    const bound = selection.fromSeq ?? (selection.since ? await firstSeqSince(deps.nats, selection.since) : 1);
    const from = Math.max(checkpoint + 1, bound);
    const target = (await deps.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    let reached = from - 1;
    let caughtUp = false;
    const reachedSeq = (seq: number) => {
      reached = Math.max(reached, seq);
      const wasCaughtUp = caughtUp;
      caughtUp ||= reached >= target;
      if (!wasCaughtUp) opts.onProgress?.({ done: reached - from + 1, total: Math.max(0, target - from + 1), caughtUp });
      if (!opts.follow && reached >= target) run.abort();
    };
    reachedSeq(reached);
    if (stoppedAt) run.abort();

    let lastIdleCheckpoint = 0;
    const applyBatch = async (events: StoredEvent<JetcronEvent>[], last: number) => {
      if (!events.length) {
        // Nothing selected: move the checkpoint now and then, not per batch.
        if (Date.now() - lastIdleCheckpoint >= IDLE_CHECKPOINT_MS) {
          await checkpointTo(db, last);
          lastIdleCheckpoint = Date.now();
        }
        return;
      }
      await db.transaction().execute(async (trx) => {
        await projection.apply(events, trx);
        await checkpointTo(trx, last);
      });
      applied += events.length;
    };
    /**
     * Strict: the batch failed. Its events are applied one at a time (a savepoint each,
     * all rolled back) to find the first that throws; the messages wholly before it are
     * kept, and the replay stops there: its message is the next run's first.
     */
    const stopAtCulprit = async (events: StoredEvent<JetcronEvent>[], err: unknown): Promise<never> => {
      let culprit: { e: StoredEvent<JetcronEvent>; err: unknown } | undefined;
      const probed = Symbol('probed');
      await db.transaction().execute(async (trx) => {
        for (const e of events) {
          await sql`SAVEPOINT strict`.execute(trx);
          try {
            await projection.apply([e], trx);
            await sql`RELEASE SAVEPOINT strict`.execute(trx);
          } catch (eventErr) {
            if (isTransient(eventErr)) throw eventErr;
            culprit = { e, err: eventErr };
            break;
          }
        }
        throw probed;
      }).catch((x: unknown) => {
        if (x !== probed) throw x;
      });
      // Not reproduced one event at a time (it depended on the batch): the batch's first event is named.
      const at = culprit ?? { e: events[0]!, err };
      const before = events.filter((d) => d.seq < at.e.seq);
      if (before.length) {
        await applyBatch(before, before[before.length - 1]!.seq);
        reachedSeq(before[before.length - 1]!.seq);
      }
      stoppedAt = { seq: at.e.seq, index: at.e.index ?? 0, id: at.e.event.id, type: at.e.event.type, error: describeError(at.err) };
      run.abort();
      throw at.err;
    };

    const counting: Supervisor = {
      ...supervisor,
      async failed(name, item, err, tries) {
        const verdict = await supervisor.failed(name, item, err, tries);
        if (verdict.skip) skipped++;
        return verdict;
      },
    };
    const handle = async (batch: StreamItem<Picked[]>[]) => {
      const events = flatten(batch);
      const last = batch[batch.length - 1]!.seq;
      if (!opts.strict) return applyBatch(events, last);
      try {
        await applyBatch(events, last);
      } catch (err) {
        if (isTransient(err) || !events.length) throw err;
        await stopAtCulprit(events, err);
      }
    };
    const reading = stoppedAt ? Promise.resolve(false) : readStream<Picked[]>(deps.nats, {
      stream: STREAMS.events.name, decode, startSeq: from, maxBatch: 1000, weigh: (events) => events.length,
      // Types that live on one channel: the server sends only its messages (the catalogue knows where each type is stored).
      filter: selection.types && subjectFilterOf(selection.types, selection.org),
      signal: run.signal, log: deps.log, name: consumer, supervisor: counting,
      // Up to the end the log has now: read once as a range; a follower follows the log.
      ...(opts.follow ? {} : { through: target }),
      onSkip: async ({ seq }) => {
        await checkpointTo(db, seq);
        reachedSeq(seq);
      },
      reapply: async (item, index) => {
        const events = flatten([item as StreamItem<Picked[]>]).filter((e) => index === undefined || e.index === index);
        await db.transaction().execute(async (trx) => projection.apply(events, trx));
      },
      // A commit that keeps failing: its events that fail are recorded and skipped, the others applied.
      applyApart: async (item, skip) => {
        const events = flatten([item]);
        if (events.length < 2) return false;
        let missed = 0;
        await db.transaction().execute(async (trx) => {
          await applyEachApart(trx, events, (e) => projection.apply([e], trx), (e, err) => skip(failedEventOf(e), err).then(() => void missed++));
          await checkpointTo(trx, item.seq);
        });
        applied += events.length - missed;
        return true;
      },
    }, async (batch) => {
      await handle(batch);
      reachedSeq(batch[batch.length - 1]!.seq);
    });
    // A strict stop ends the read from inside its handler (an abort, then the event's error).
    const readThrough = await reading;
    if (!stoppedAt && readThrough && reached < target) {
      // The range's last messages were deleted, or nothing selected followed the last checkpoint.
      await checkpointTo(db, target);
      reachedSeq(target);
    } else if (!stoppedAt && reached >= from) await checkpointTo(db, reached);
    if (!stoppedAt && !opts.follow && reached < target && !opts.signal?.aborted) {
      throw new Error(`lost the lease of projection ${projection.name} at seq ${reached}; run it again`);
    }
    return { projection: projection.name, events: applied, skipped, last_seq: stoppedAt ? Math.min(reached, stoppedAt.seq - 1) : reached, seconds: (Date.now() - t0) / 1000, ...(stoppedAt ? { stopped_at: stoppedAt } : {}) };
  } finally {
    supervisor.close();
    await db.destroy();
    await lease.release();
  }
}
