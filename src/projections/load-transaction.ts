import { sql } from 'kysely';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { Db } from '../db/connect.ts';
import type { Nats } from '../nats/connection.ts';
import { writeCheckpoint, type Write } from './projector.ts';

/** Commits one batch's writes with its checkpoint, as `batchCommitter`'s function does. */
export type CommitBatch = (write: Write, last: number, committed: number) => Promise<void>;

/** A batch failed inside the load transaction, which so rolled back whole. */
export class LoadRolledBack extends Error {}

/**
 * A rebuild's batches into fresh tables, all in one transaction that begins by
 * truncating those tables, its COPYs with FREEZE (`run` gets `freeze: true` and its
 * writes say so). Why, on the embedded Postgres (`wal_level = minimal`,
 * docs/operations.md): a table truncated in the transaction that fills it is written
 * without WAL, its indexes too, and its files synced at commit instead; and frozen
 * rows need no hint bits set by their first reader, which with data checksums (initdb's
 * default) would WAL-log every page a second time as the indexes are built at the end.
 * With any other setting Postgres writes WAL as usual and the rows are the same.
 *
 * No savepoints: COPY FREEZE needs the truncating (sub)transaction. A batch Postgres
 * refuses so rolls all of it back (`LoadRolledBack`, the tables fresh again at
 * checkpoint 0, from which the caller goes on one commit a batch). Whatever else ends
 * the run (the end of the range, a preparing thread that dies, the lease lost) commits
 * the batches written so far with their checkpoint, as separate commits would have, and
 * then `run`'s error is thrown. A process killed part-way rolls all of it back: fresh
 * tables at checkpoint 0, from which the next rebuild (or the live projector) starts.
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
  let refused: unknown;
  const ended = await deps.db.transaction().execute(async (trx) => {
    // The log is the source of truth (as batchCommitter says): no wait on the WAL flush.
    await sql`SELECT set_config('synchronous_commit', 'off', true)`.execute(trx);
    await sql`TRUNCATE ${sql.join(tables.map((t) => sql.table(t)))}`.execute(trx);
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = {
        value: await run(async (write, last) => {
          try {
            await write(trx);
            await writeCheckpoint(trx, last);
          } catch (err) {
            refused ??= err;
            throw err;
          }
          reached = last;
        }),
      };
    } catch (error) {
      outcome = { error };
    }
    // The transaction is aborted: nothing of it can commit.
    if (refused !== undefined) throw new LoadRolledBack(`a batch failed inside the load transaction: ${(refused as Error).message}`);
    return outcome;
  });
  if (reached) deps.nats.nc.publish(SUBJECTS.projected, String(reached));
  if ('error' in ended) throw ended.error;
  return ended.value;
}
