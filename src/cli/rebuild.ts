import { randomBytes } from 'node:crypto';
import { buildIndexes, dropSecondaryIndexes } from '../db/deferred-indexes.ts';
import { dropReadModels, migrate, PROJECTED_TABLES } from '../db/migrations.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { createLease, openLeaseBucket, type Lease } from '../nats/lease.ts';
import { openSupervisor } from '../nats/supervisor.ts';
import { withServices, type ServiceUrls } from './services.ts';
import { STREAMS } from '../../streams/definitions.ts';
import { PROJECTOR_LEASE, readCheckpoint, runProjection } from '../projections/projector.ts';
import { startProgress, type ProgressOut } from './progress.ts';
import { projectOnTwoThreads } from '../projections/two-thread-rebuild.ts';
import { tracingOn } from '../telemetry/tracing.ts';
import type { Worker } from 'node:worker_threads';

const LEASE_WAIT_MS = 30_000;
/**
 * Events per commit: a rebuild is behind by the whole log. On one thread a batch is
 * prepared in one turn of the event loop that also renews the lease: 10,000 events.
 */
const REBUILD_BATCH = 10_000;
/**
 * On two threads the lease's thread only writes, so a batch may be larger: more of a
 * row's changes merge in memory (an execution created and finished in one batch is one
 * COPY row, not a COPY and an UPDATE): less of Postgres's CPU (docs/benchmarks.md).
 * The process's peak memory stays about what one thread's 10,000 took.
 */
const TWO_THREAD_BATCH = 40_000;
/**
 * Drops every read model and replays EVENTS into fresh tables. It first takes the
 * projector lease, so no other projector writes while the tables are rebuilt: with
 * the service running, stop its projector role first (other roles may keep running).
 * With no NATS_URL/DATABASE_URL and the service stopped, it starts the embedded
 * servers of the data directory itself.
 */
export async function rebuildProjections(opts: ServiceUrls & {
  log: (m: string) => void;
  print: (o: unknown) => void;
  /** Where the progress bar (or periodic lines) and the summary go; none when absent. */
  progressTo?: ProgressOut;
  /** Sees each preparing thread as it starts (tests stop one). */
  onThread?: (thread: Worker) => void;
}): Promise<void> {
  await withServices(opts, 'jetcron rebuild', async ({ nats, db, natsUrl }) => {
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
      const deferred = await dropSecondaryIndexes(db);
      const target = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
      const progress = opts.progressTo && startProgress({ label: 'rebuild', total: target, out: opts.progressTo });
      const t1 = Date.now();
      let t2 = t1;
      try {
        await projectUntil(target, { nats, natsUrl, db, lease, onThread: opts.onThread, log: progress ? (m: string) => progress.aside(() => opts.log(m)) : opts.log, update: (n) => progress?.update(n) });
      } finally {
        t2 = Date.now();
        // Also when the rebuild stopped short: the live projector goes on over these tables.
        await buildIndexes(db, deferred);
      }
      if ((await readCheckpoint(db)) < target) throw new Error('lost the projector lease during the rebuild; run it again');
      progress?.finish(target);
      const t3 = Date.now();
      // Where the time went: fresh tables, the log projected, the secondary indexes built.
      const stages = { tables: (t1 - t0) / 1000, projecting: (t2 - t1) / 1000, indexes: (t3 - t2) / 1000 };
      opts.print({ rebuilt: true, events: target, seconds: (t3 - t0) / 1000, stages });
    } finally {
      await lease.release();
    }
  });
}

/** Projects from the checkpoint through `target` (the log read once, as a range), unless the lease is lost. */
async function projectUntil(target: number, deps: {
  nats: Nats; natsUrl: string; db: Db; lease: Lease; log: (m: string) => void; update: (reached: number) => void; onThread: ((thread: Worker) => void) | undefined;
}): Promise<void> {
  const { nats, db, log } = deps;
  const run = new AbortController();
  deps.lease.onLost(() => run.abort());
  const supervisor = await openSupervisor(nats, log);
  // The tables start empty: the rows a batch creates go in by COPY. Two threads: the
  // next batch is read and prepared while Postgres commits this one. With tracing on,
  // one thread, which makes each traced event's span (the preparing thread keeps no
  // headers).
  let projected = false;
  // Inside the load transaction the checkpoint others read stays at 0 until its commit.
  let written = 0;
  const projecting = (tracingOn()
    ? runProjection({ nats, db, log, supervisor }, run.signal, { pipelined: true, copyCreated: true, maxBatch: REBUILD_BATCH, through: target })
    : projectOnTwoThreads({ nats, db, log, supervisor }, run.signal, {
      natsUrl: deps.natsUrl, through: target, maxBatch: TWO_THREAD_BATCH, onThread: deps.onThread,
      freshTables: PROJECTED_TABLES, onWritten: (seq) => (written = seq),
    }))
    .finally(() => {
      projected = true;
      supervisor.close();
    });
  projecting.catch(() => {}); // awaited below; not an unhandled rejection while the loop waits on Postgres
  while (!projected) {
    deps.update(Math.max(written, await readCheckpoint(db)));
    await Promise.race([projecting, new Promise((r) => setTimeout(r, 50))]);
  }
  await projecting;
}
