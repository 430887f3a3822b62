import { randomBytes } from 'node:crypto';
import { connectDb } from '../db/connect.ts';
import { dropReadModels, migrate } from '../db/migrations.ts';
import { applyStreams } from '../nats/apply-streams.ts';
import { connectNats } from '../nats/connection.ts';
import { createLease, openLeaseBucket } from '../nats/lease.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { PROJECTOR_LEASE, readCheckpoint, runProjection } from '../projections/projector.ts';
import { startEmbeddedNats } from '../runtime/embedded-nats.ts';
import { startEmbeddedPostgres } from '../runtime/embedded-postgres.ts';

const LEASE_WAIT_MS = 30_000;

/**
 * Drops every read model and replays EVENTS into fresh tables. It first takes the
 * projector lease, so no other projector writes while the tables are rebuilt: with
 * the service running, stop its projector role first (other roles may keep running).
 * With no NATS_URL/DATABASE_URL and the service stopped, it starts the embedded
 * servers of the data directory itself.
 */
export async function rebuildProjections(opts: {
  natsUrl: string | undefined;
  databaseUrl: string | undefined;
  dataDir: string;
  log: (m: string) => void;
  print: (o: unknown) => void;
}): Promise<void> {
  const cleanup: Array<() => Promise<void>> = [];
  try {
    let natsUrl = opts.natsUrl;
    if (!natsUrl) {
      const n = await startEmbeddedNats({ dataDir: opts.dataDir, log: () => {} });
      cleanup.push(() => n.stop());
      natsUrl = n.url;
    }
    let databaseUrl = opts.databaseUrl;
    if (!databaseUrl) {
      const pg = await startEmbeddedPostgres({ dataDir: opts.dataDir, log: () => {} });
      cleanup.push(() => pg.stop());
      databaseUrl = pg.url;
    }
    const nats = await connectNats(natsUrl, 'jetcron rebuild');
    cleanup.push(() => nats.close());
    const { db } = connectDb(databaseUrl);
    cleanup.push(() => db.destroy());
    await applyStreams(nats, 1);

    const lease = createLease(await openLeaseBucket(nats), PROJECTOR_LEASE, `rebuild-${randomBytes(4).toString('hex')}`);
    try {
      await lease.acquire(AbortSignal.timeout(LEASE_WAIT_MS));
    } catch {
      throw new Error(`another projector holds the lease: stop the service's projector role, then run this again`);
    }
    cleanup.push(() => lease.release());

    const t0 = Date.now();
    await dropReadModels(db);
    await migrate(db);
    const target = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const run = new AbortController();
    lease.onLost(() => run.abort());
    const projecting = runProjection({ nats, db, log: opts.log }, run.signal);
    while ((await readCheckpoint(db)) < target && !run.signal.aborted) await new Promise((r) => setTimeout(r, 50));
    run.abort();
    await projecting;
    if ((await readCheckpoint(db)) < target) throw new Error('lost the projector lease during the rebuild; run it again');
    opts.print({ rebuilt: true, events: target, seconds: (Date.now() - t0) / 1000 });
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  }
}
