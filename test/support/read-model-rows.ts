import { sql } from 'kysely';
import type { Db } from '../../src/db/connect.ts';
import { READ_MODEL_TABLES } from '../../src/db/migrations.ts';

/** Every read-model row, table by table, in a stable order: what two projections of one log must both give. */
export async function rowsOf(db: Db): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of READ_MODEL_TABLES) {
    if (table === 'projection_checkpoints') continue;
    const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(t) AS row FROM ${sql.table(table)} t ORDER BY t::text`.execute(db);
    out[table] = rows.map((r) => r.row);
  }
  return out;
}
