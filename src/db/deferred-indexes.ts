import { sql, type Kysely } from 'kysely';
import { READ_MODEL_TABLES } from './migrations.ts';

/**
 * Secondary indexes the projector's own statements look rows up by while a rebuild
 * loads: a deleted task's or schedule's executions are found by `source_id`. Without
 * it every such delete reads the whole executions table.
 */
const KEPT_DURING_LOAD = new Set(['executions_source_scheduled']);

/**
 * Drops the read models' secondary indexes (not primary keys or unique ones: upserts
 * and integrity need them) and returns how to build them again. For a rebuild
 * into fresh tables: one sorted build per index at the end costs less than keeping
 * each up to date through hundreds of thousands of single-row inserts. The indexes
 * are read from the catalog, so the list stays what the migrations made.
 */
export async function dropSecondaryIndexes(db: Kysely<any>): Promise<string[]> {
  const { rows } = await sql<{ name: string; def: string }>`
    SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS def
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class t ON t.oid = x.indrelid
    WHERE t.relname = ANY(${[...READ_MODEL_TABLES]}) AND t.relnamespace = current_schema()::regnamespace
      AND NOT x.indisprimary AND NOT x.indisunique
      AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
    ORDER BY i.relname`.execute(db);
  const dropped = rows.filter((r) => !KEPT_DURING_LOAD.has(r.name));
  for (const r of dropped) await sql`DROP INDEX ${sql.ref(r.name)}`.execute(db);
  return dropped.map((r) => r.def);
}

/**
 * Index builds at once, each on a connection of its own: a build is one backend's
 * sort, and a rebuild's are a second or more it overlaps with nothing else.
 */
const BUILDS_AT_ONCE = 2;

/** Builds the indexes `dropSecondaryIndexes` dropped. */
export async function buildIndexes(db: Kysely<any>, definitions: string[]): Promise<void> {
  const queue = [...definitions];
  const builder = async () => {
    for (let def = queue.shift(); def !== undefined; def = queue.shift()) await sql.raw(def).execute(db);
  };
  await Promise.all(Array.from({ length: BUILDS_AT_ONCE }, builder));
}
