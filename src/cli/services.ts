import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectDb, type Db } from '../db/connect.ts';
import { applyStreams, replicasFromEnv } from '../nats/apply-streams.ts';
import { connectNats, type Nats } from '../nats/connection.ts';
import { startEmbeddedNats } from '../runtime/embedded-nats.ts';
import { startEmbeddedPostgres } from '../runtime/embedded-postgres.ts';
import { natsUrlFromDataDir } from '../runtime/find-nats-url.ts';

export interface ServiceUrls {
  natsUrl: string | undefined;
  databaseUrl: string | undefined;
  dataDir: string;
}

/**
 * Where an admin command finds NATS and Postgres: `NATS_URL`/`DATABASE_URL`, else a
 * running embedded service's URLs in the data directory (it writes them while it
 * runs), else undefined (the command starts the data directory's servers itself).
 */
export function serviceUrls(dataDir: string): ServiceUrls {
  const pgFile = join(dataDir, 'postgres.url');
  const runningPg = existsSync(pgFile) && existsSync(join(dataDir, 'nats.url')) ? readFileSync(pgFile, 'utf8').trim() : undefined;
  return { natsUrl: process.env.NATS_URL || natsUrlFromDataDir(dataDir), databaseUrl: process.env.DATABASE_URL || runningPg, dataDir };
}

/** Connects to NATS and Postgres (starting the embedded ones when no URL is known), runs `fn`, and cleans up. */
export async function withServices<T>(urls: ServiceUrls, name: string, fn: (s: { nats: Nats; db: Db; natsUrl: string; databaseUrl: string }) => Promise<T>): Promise<T> {
  const cleanup: Array<() => Promise<void>> = [];
  try {
    let natsUrl = urls.natsUrl;
    if (!natsUrl) {
      const n = await startEmbeddedNats({ dataDir: urls.dataDir, log: () => {} });
      cleanup.push(() => n.stop());
      natsUrl = n.url;
    }
    let databaseUrl = urls.databaseUrl;
    if (!databaseUrl) {
      const pg = await startEmbeddedPostgres({ dataDir: urls.dataDir, log: () => {} });
      cleanup.push(() => pg.stop());
      databaseUrl = pg.url;
    }
    const nats = await connectNats(natsUrl, name);
    cleanup.push(() => nats.close());
    const { db } = connectDb(databaseUrl);
    cleanup.push(() => db.destroy());
    await applyStreams(nats, replicasFromEnv(process.env));
    return await fn({ nats, db, natsUrl, databaseUrl });
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  }
}
