import { sql } from 'kysely';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { writeCheckpoint, type Write } from './projector.ts';

/** Commits one batch's writes with its checkpoint, as `batchCommitter`'s function does. */
export type CommitBatch = (write: Write, last: number, committed: number) => Promise<void>;

/**
 * A rebuild's batches into fresh tables, all in one transaction that begins by
 * truncating those tables. Why: with `wal_level = minimal` (the embedded Postgres's,
 * docs/operations.md) a table created or truncated in the transaction that writes it
 * is written without WAL (its files are synced at commit instead), its indexes too,
 * which takes about a quarter off Postgres's CPU in a rebuild
 * (docs/benchmarks.md, "Rebuild, fifth step"). With any other setting Postgres writes
 * WAL as usual and the rows are the same.
 *
 * Each batch runs under a savepoint: a batch Postgres refuses is rolled back alone
 * (`run` sees its error, as a failed commit), and whatever ends the run (the end of the
 * range, a refused batch, a preparing thread that dies, the lease lost) commits the
 * batches written so far with their checkpoint, as separate commits would have; the
 * caller goes on from that checkpoint one commit at a time. A process killed
 * part-way rolls all of it back: fresh tables and checkpoint 0, from which the next
 * rebuild (or the live projector) starts.
 *
 * Only for tables known empty and unread by anything else (the rebuild's, just made by
 * the migrations under the projector lease): TRUNCATE holds their ACCESS EXCLUSIVE
 * locks to the commit, so the API's reads of them wait for the rebuild's end instead
 * of seeing half-built tables.
 */
export async function inLoadTransaction<T>(
  deps: { db: Db; nats: Nats },
  tables: readonly string[],
  run: (commit: CommitBatch) => Promise<T>,
): Promise<T> {
  let reached = 0;
  const result = await deps.db.transaction().execute(async (trx) => {
    // The log is the source of truth (as batchCommitter says): no wait on the WAL flush.
    await sql`SELECT set_config('synchronous_commit', 'off', true)`.execute(trx);
    await sql`TRUNCATE ${sql.join(tables.map((t) => sql.table(t)))}`.execute(trx);
    return run(async (write, last) => {
      await sql`SAVEPOINT load_batch`.execute(trx);
      try {
        await write(trx);
        await writeCheckpoint(trx, last);
      } catch (err) {
        // On a connection that is gone this fails too; the error to report is the batch's.
        await sql`ROLLBACK TO SAVEPOINT load_batch`.execute(trx).catch(() => {});
        throw err;
      }
      await sql`RELEASE SAVEPOINT load_batch`.execute(trx);
      reached = last;
    });
  });
  if (reached) deps.nats.nc.publish(SUBJECTS.projected, String(reached));
  return result;
}
