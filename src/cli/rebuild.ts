import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/connect.ts';
import { dropReadModels, migrate, READ_MODEL_TABLES } from '../db/migrations.ts';
import { createLease, openLeaseBucket } from '../nats/lease.ts';
import { openSupervisor } from '../nats/supervisor.ts';
import { withServices, type ServiceUrls } from './services.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { PROJECTOR_LEASE, readCheckpoint, runProjection } from '../projections/projector.ts';

const LEASE_WAIT_MS = 30_000;
/** Events per commit: a rebuild is behind by the whole log. */
const REBUILD_BATCH = 10_000;
/** The projector's deletes find rows through these, so they stay during the load. */
const KEPT_INDEXES = ['executions_source_scheduled', 'pings_monitor_received', 'inbound_events_endpoint_received'];

/**
 * Drops the read models' secondary indexes the projector does not read through (none
 * unique); returns the statements that create them again. One sort per index after the
 * load costs less than updating each index row by row during it.
 */
async function dropSecondaryIndexes(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string; def: string }>`
    SELECT ic.relname AS name, pg_get_indexdef(i.indexrelid) AS def
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(${[...READ_MODEL_TABLES]})
      AND NOT i.indisprimary AND NOT i.indisunique AND NOT (ic.relname = ANY(${KEPT_INDEXES}))`.execute(db);
  for (const r of rows) await sql`DROP INDEX ${sql.id(r.name)}`.execute(db);
  return rows.map((r) => r.def);
}

/**
 * Drops every read model and replays EVENTS into fresh tables. It first takes the
 * projector lease, so no other projector writes while the tables are rebuilt: with
 * the service running, stop its projector role first (other roles may keep running).
 * With no NATS_URL/DATABASE_URL and the service stopped, it starts the embedded
 * servers of the data directory itself.
 */
export async function rebuildProjections(opts: ServiceUrls & { log: (m: string) => void; print: (o: unknown) => void }): Promise<void> {
  await withServices(opts, 'jetcron rebuild', async ({ nats, db }) => {
    const lease = createLease(await openLeaseBucket(nats), PROJECTOR_LEASE, `rebuild-${randomBytes(4).toString('hex')}`);
    try {
      await lease.acquire(AbortSignal.timeout(LEASE_WAIT_MS));
    } catch {
      throw new Error(`another projector holds the lease: stop the service's projector role, then run this again`);
    }
    try {
      const t0 = Date.now();
      await dropReadModels(db);
      await migrate(db);
      const target = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
      const indexes = await dropSecondaryIndexes(db);
      try {
        const run = new AbortController();
        lease.onLost(() => run.abort());
        const supervisor = await openSupervisor(nats, opts.log);
        // Pipelined: the next batch is read and prepared while Postgres commits this one.
        const projecting = runProjection({ nats, db, log: opts.log, supervisor }, run.signal, { pipelined: true, maxBatch: REBUILD_BATCH }).finally(() => supervisor.close());
        while ((await readCheckpoint(db)) < target && !run.signal.aborted) await new Promise((r) => setTimeout(r, 50));
        run.abort();
        await projecting;
        if ((await readCheckpoint(db)) < target) throw new Error('lost the projector lease during the rebuild; run it again');
      } finally {
        for (const def of indexes) await sql.raw(def).execute(db);
      }
      opts.print({ rebuilt: true, events: target, seconds: (Date.now() - t0) / 1000 });
    } finally {
      await lease.release();
    }
  });
}
