import { sql } from 'kysely';
import type { Db } from '../../src/db/connect.ts';
import { PROJECTED_TABLES } from '../../src/db/migrations.ts';

/** Every read-model row, table by table, in a stable order: what two projections of one log must both give. */
export async function rowsOf(db: Db): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of PROJECTED_TABLES) {
    const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(t) AS row FROM ${sql.table(table)} t ORDER BY t::text`.execute(db);
    out[table] = rows.map((r) => r.row);
  }
  return out;
}
