import { sql } from 'kysely';
import { SUBJECTS } from '../../streams/definitions.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { readEvents } from '../nats/event-reader.ts';
import { createLease, openLeaseBucket, whileLeased } from '../nats/lease.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { applyEvent } from './apply-event.ts';
import { ProjectionBatch } from './batch.ts';

export const PROJECTOR_NAME = 'read_models_v1';
export const PROJECTOR_LEASE = 'projector';
const PRUNE_EVERY_MS = 3_600_000;

export async function readCheckpoint(db: Db, name = PROJECTOR_NAME): Promise<number> {
  const row = await db.selectFrom('projection_checkpoints').select('seq').where('name', '=', name).executeTakeFirst();
  return row ? Number(row.seq) : 0;
}

/** Projects from the checkpoint until `signal` aborts; the caller holds the projector lease. */
export async function runProjection(deps: ProjectorDeps, signal: AbortSignal): Promise<void> {
  const from = (await readCheckpoint(deps.db)) + 1;
  let prunedAt = 0;
  const writeCheckpoint = async (db: Db, seq: number) => {
    await sql`INSERT INTO projection_checkpoints (name, seq) VALUES (${PROJECTOR_NAME}, ${seq})
      ON CONFLICT (name) DO UPDATE SET seq = GREATEST(projection_checkpoints.seq, EXCLUDED.seq), updated_at = now()`.execute(db);
  };
  // A skipped (recorded) event: the read models move past it, and writers waiting for it are released.
  const onSkip = async ({ seq }: { seq: number }) => {
    await writeCheckpoint(deps.db, seq);
    deps.nats.nc.publish(SUBJECTS.projected, String(seq));
  };
  const read = { startSeq: from, maxBatch: 2000, signal, log: deps.log, name: PROJECTOR_LEASE, supervisor: deps.supervisor, onSkip };
  await readEvents(deps.nats, read, async (events) => {
    const batch = new ProjectionBatch();
    for (const e of events) applyEvent(batch, e.event);
    const last = events[events.length - 1]!.seq;
    await deps.db.transaction().execute(async (trx) => {
      await batch.flush(trx);
      // INBOUND forgets requests after 30 days (its max_age); their rows follow, at most hourly.
      if (Date.now() - prunedAt > PRUNE_EVERY_MS) {
        await sql`DELETE FROM inbound_events WHERE received_at < now() - interval '30 days'`.execute(trx);
        prunedAt = Date.now();
      }
      await writeCheckpoint(trx, last);
    });
    deps.nats.nc.publish(SUBJECTS.projected, String(last));
  });
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
  const abort = new AbortController();
  const done = (async () => {
    const lease = createLease(await openLeaseBucket(deps.nats), PROJECTOR_LEASE, deps.owner, deps.log);
    await whileLeased(lease, abort.signal, deps.log, (signal) => runProjection(deps, signal));
  })();
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}
