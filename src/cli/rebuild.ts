import { connectDb } from '../db/connect.ts';
import { dropReadModels, migrate } from '../db/migrations.ts';
import { applyStreams } from '../nats/apply-streams.ts';
import { connectNats } from '../nats/connection.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { readCheckpoint, startProjector } from '../projections/projector.ts';
import { startEmbeddedPostgres } from '../runtime/embedded-postgres.ts';

/**
 * Drops every read model and replays EVENTS into fresh tables. It takes the
 * projector lease like any projector, so run it while no other projector runs
 * (stop the service or its projector role first).
 */
export async function rebuildProjections(opts: {
  natsUrl: string;
  databaseUrl: string | undefined;
  dataDir: string;
  log: (m: string) => void;
  print: (o: unknown) => void;
}): Promise<void> {
  let stopPg: (() => Promise<void>) | undefined;
  let databaseUrl = opts.databaseUrl;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({ dataDir: opts.dataDir, log: opts.log });
    databaseUrl = pg.url;
    stopPg = () => pg.stop();
  }
  const nats = await connectNats(opts.natsUrl, 'jetcron rebuild');
  const { db } = connectDb(databaseUrl);
  try {
    await applyStreams(nats, 1);
    const t0 = Date.now();
    await dropReadModels(db);
    await migrate(db);
    const target = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const projector = startProjector({ nats, db, owner: `rebuild-${process.pid}`, log: opts.log });
    const deadline = Date.now() + 30_000;
    let reached = 0;
    while ((reached = await readCheckpoint(db)) < target) {
      if (Date.now() > deadline && reached === 0) {
        await projector.stop();
        throw new Error('no progress in 30 s: is another projector (a running service) holding the lease? Stop it first.');
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await projector.stop();
    opts.print({ rebuilt: true, events: target, seconds: (Date.now() - t0) / 1000 });
  } finally {
    await db.destroy();
    await nats.close();
    await stopPg?.();
  }
}
