import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { storableText } from '../lib/input-checks.ts';

export type Row = Record<string, unknown>;
export type ColumnTypes = Record<string, string>;

/** Groups rows by their set of columns so each group is one statement. */
function byColumns(rows: Row[]): Map<string, Row[]> {
  const groups = new Map<string, Row[]>();
  for (const row of rows) {
    const key = Object.keys(row).sort().join(',');
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(row);
  }
  return groups;
}

function recordset(columns: string[], types: ColumnTypes) {
  return sql.join(columns.map((c) => sql`${sql.ref(c)} ${sql.raw(types[c] ?? 'text')}`));
}

// JSON.stringify writes NUL and lone surrogates as these escapes; jsonb refuses both.
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f][0-9a-f]{2}/i;
const storable = (_key: string, value: unknown) => (typeof value === 'string' ? storableText(value) : value);

/**
 * The rows as one JSON text Postgres accepts. An event is kept in the log as it was;
 * its read-model copy replaces what no Postgres text or jsonb can hold (NUL, lone
 * surrogates) with U+FFFD, so such an event can never stop the projector. The
 * replacer runs only when the fast path finds one of those escapes.
 */
export function toJsonRows(rows: Row[], columns: string[]): string {
  const picked = rows.map((r) => {
    const out: Row = {};
    for (const c of columns) out[c] = r[c] ?? null;
    return out;
  });
  const text = JSON.stringify(picked);
  return UNSTORABLE_ESCAPE.test(text) ? JSON.stringify(picked, storable) : text;
}

/** One INSERT … ON CONFLICT DO UPDATE per column set, rows passed as one jsonb array. */
export async function upsertRows(
  trx: Transaction<Database>,
  table: string,
  key: string | string[],
  rows: Row[],
  types: ColumnTypes,
  /** Only rows whose `column` matches an existing `table.id` (e.g. attempts of live executions). */
  parent?: { table: string; column: string },
) {
  const keys = Array.isArray(key) ? key : [key];
  for (const group of byColumns(rows).values()) {
    const columns = Object.keys(group[0]!);
    const updates = columns.filter((c) => !keys.includes(c));
    await sql`
      INSERT INTO ${sql.table(table)} (${sql.join(columns.map((c) => sql.ref(c)))})
      SELECT ${sql.join(columns.map((c) => sql.ref(c)))}
      FROM jsonb_to_recordset(${toJsonRows(group, columns)}::jsonb) AS x(${recordset(columns, types)})
      ${parent ? sql`WHERE EXISTS (SELECT 1 FROM ${sql.table(parent.table)} p WHERE p.id = x.${sql.ref(parent.column)})` : sql``}
      ON CONFLICT (${sql.join(keys.map((k) => sql.ref(k)))}) DO ${updates.length
        ? sql`UPDATE SET ${sql.join(updates.map((c) => sql`${sql.ref(c)} = EXCLUDED.${sql.ref(c)}`))}`
        : sql`NOTHING`}
    `.execute(trx);
  }
}

/** One UPDATE … FROM recordset per column set; rows whose key is absent are skipped. */
export async function updateRows(trx: Transaction<Database>, table: string, key: string, rows: Row[], types: ColumnTypes) {
  for (const group of byColumns(rows).values()) {
    const columns = Object.keys(group[0]!);
    const updates = columns.filter((c) => c !== key);
    if (!updates.length) continue;
    await sql`
      UPDATE ${sql.table(table)} AS t SET ${sql.join(updates.map((c) => sql`${sql.ref(c)} = x.${sql.ref(c)}`))}
      FROM jsonb_to_recordset(${toJsonRows(group, columns)}::jsonb) AS x(${recordset(columns, types)})
      WHERE t.${sql.ref(key)} = x.${sql.ref(key)}
    `.execute(trx);
  }
}
