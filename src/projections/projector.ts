import { sql } from 'kysely';
import { SUBJECTS } from '../../streams/definitions.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { readEvents } from '../nats/event-reader.ts';
import { createLease, openLeaseBucket, whileLeased } from '../nats/lease.ts';
import { applyEvent } from './apply-event.ts';
import { ProjectionBatch } from './batch.ts';

export const PROJECTOR_NAME = 'read_models_v1';
const PRUNE_EVERY_MS = 3_600_000;

export async function readCheckpoint(db: Db, name = PROJECTOR_NAME): Promise<number> {
  const row = await db.selectFrom('projection_checkpoints').select('seq').where('name', '=', name).executeTakeFirst();
  return row ? Number(row.seq) : 0;
}

/** Projects from the checkpoint until `signal` aborts; the caller holds the projector lease. */
export async function runProjection(deps: { nats: Nats; db: Db; log: (m: string) => void }, signal: AbortSignal): Promise<void> {
  const from = (await readCheckpoint(deps.db)) + 1;
  let prunedAt = 0;
  await readEvents(deps.nats, { startSeq: from, maxBatch: 2000, signal, log: deps.log, name: 'projector' }, async (events) => {
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
      await sql`INSERT INTO projection_checkpoints (name, seq) VALUES (${PROJECTOR_NAME}, ${last})
        ON CONFLICT (name) DO UPDATE SET seq = GREATEST(projection_checkpoints.seq, EXCLUDED.seq), updated_at = now()`.execute(trx);
    });
    deps.nats.nc.publish(SUBJECTS.projected, String(last));
  });
}

export const PROJECTOR_LEASE = 'projector';

/**
 * Projects EVENTS into the Postgres read models. One active projector at a time
 * (a KV lease) reads in stream order from the checkpoint kept in Postgres; each
 * batch and its checkpoint commit in one transaction, so a crash replays at most
 * the uncommitted batch and replays change nothing (rows are upserts of state).
 */
export function startProjector(deps: { nats: Nats; db: Db; owner: string; log: (m: string) => void }) {
  const abort = new AbortController();
  const done = (async () => {
    const lease = createLease(await openLeaseBucket(deps.nats), PROJECTOR_LEASE, deps.owner);
    await whileLeased(lease, abort.signal, deps.log, (signal) => runProjection(deps, signal));
  })();
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}
