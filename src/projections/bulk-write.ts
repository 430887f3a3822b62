import { sql, type RawBuilder } from 'kysely';
import { storableText } from '../lib/input-checks.ts';

export type Row = Record<string, unknown>;

/** A key already there: Postgres's unique_violation (a row COPY would create exists). */
export const isUniqueViolation = (err: unknown) => (err as { code?: unknown } | null)?.code === '23505';
/** Postgres type of each column: text, json, jsonb, timestamptz, integer, bigint, boolean. */
export type ColumnTypes = Record<string, string>;

/**
 * Groups rows by their set of columns so each group is one statement. Rows made by the
 * same code follow each other with the same columns: such a row joins the previous
 * row's group without its key being built (a rebuild groups ~250,000 rows).
 */
export function byColumns(rows: Row[]): Map<string, Row[]> {
  const groups = new Map<string, Row[]>();
  let previous: string[] = [];
  let list: Row[] = [];
  for (const row of rows) {
    const columns = Object.keys(row);
    if (!sameColumns(columns, previous)) {
      const key = columns.join(',');
      const found = groups.get(key);
      if (found) list = found;
      else groups.set(key, (list = []));
      previous = columns;
    }
    list.push(row);
  }
  return groups;
}

function sameColumns(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// JSON.stringify writes NUL and lone surrogates as these escapes; Postgres refuses both.
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f][0-9a-f]{2}/i;
const storable = (_key: string, value: unknown) => (typeof value === 'string' ? storableText(value) : value);

/**
 * One column of a set of rows as one JSON array. An event is kept in the log as it
 * was; its read-model copy replaces what no Postgres text or jsonb can hold (NUL, lone
 * surrogates) with U+FFFD, so such an event can never stop the projector. The check
 * costs one regular expression over the column's JSON; the replacer runs only when it
 * matches.
 */
export function columnJson(rows: Row[], column: string): string {
  return jsonText(rows.map((r) => r[column] ?? null));
}

/** A value's JSON (`text`, when already written), what Postgres cannot hold replaced as `columnJson` says. */
export function jsonText(value: unknown, text = JSON.stringify(value)): string {
  return UNSTORABLE_ESCAPE.test(text) ? JSON.stringify(value, storable) : text;
}

/** The set-returning function that walks one column's JSON array as values of the column's type. */
function elements(type: string | undefined, array: string) {
  if (type === 'jsonb') return sql`jsonb_array_elements(${array}::jsonb)`;
  // json elements are slices of the array's text: checked once, never parsed again.
  if (type === 'json') return sql`json_array_elements(${array}::json)`;
  return sql`json_array_elements_text(${array}::json)`;
}

/**
 * The rows as a relation `x(col1, …)` of typed columns: each column is one parameter
 * (a JSON array) and `ROWS FROM` walks them side by side. A statement so takes
 * thousands of rows in a few parameters, and Postgres parses each value once: json and
 * jsonb columns as such, the others as text cast to their type. A JSON null is SQL NULL.
 */
function rowsFrom(rows: Row[], columns: string[], types: ColumnTypes) {
  const arrays = columns.map((c) => elements(types[c], columnJson(rows, c)));
  return sql`ROWS FROM (${sql.join(arrays)}) AS x(${sql.join(columns.map((c) => sql.ref(c)))})`;
}

/** Each column of `x` as its type. */
function typed(columns: string[], types: ColumnTypes) {
  return sql.join(columns.map((c) => {
    const type = types[c] ?? 'text';
    if (type === 'jsonb') return sql`nullif(x.${sql.ref(c)}, 'null') AS ${sql.ref(c)}`;
    // json has no equality operator; its type says null.
    if (type === 'json') return sql`CASE WHEN json_typeof(x.${sql.ref(c)}) <> 'null' THEN x.${sql.ref(c)} END AS ${sql.ref(c)}`;
    return type === 'text' ? sql`x.${sql.ref(c)}` : sql`x.${sql.ref(c)}::${sql.raw(type)} AS ${sql.ref(c)}`;
  }));
}

/** Only rows whose `column` matches an existing `table.id` (e.g. attempts of live executions). */
export interface Parent {
  table: string;
  column: string;
}

/** One INSERT … SELECT … ON CONFLICT DO UPDATE per column set. */
export function upsertRows(table: string, key: string | string[], rows: Row[], types: ColumnTypes, parent?: Parent): RawBuilder<unknown>[] {
  const keys = Array.isArray(key) ? key : [key];
  return [...byColumns(rows).values()].map((group) => {
    const columns = Object.keys(group[0]!);
    const updates = columns.filter((c) => !keys.includes(c));
    return sql`
      INSERT INTO ${sql.table(table)} (${sql.join(columns.map((c) => sql.ref(c)))})
      SELECT ${typed(columns, types)} FROM ${rowsFrom(group, columns, types)}
      ${parent ? sql`WHERE EXISTS (SELECT 1 FROM ${sql.table(parent.table)} p WHERE p.id = x.${sql.ref(parent.column)})` : sql``}
      ON CONFLICT (${sql.join(keys.map((k) => sql.ref(k)))}) DO ${updates.length
        ? sql`UPDATE SET ${sql.join(updates.map((c) => sql`${sql.ref(c)} = EXCLUDED.${sql.ref(c)}`))}`
        : sql`NOTHING`}
    `;
  });
}

/** One UPDATE … FROM per column set; rows whose key is absent are skipped. With `returning`, each answers the keys it found. */
export function updateRows(table: string, key: string, rows: Row[], types: ColumnTypes, returning = false): RawBuilder<unknown>[] {
  return [...byColumns(rows).values()].flatMap((group) => {
    const columns = Object.keys(group[0]!);
    const updates = columns.filter((c) => c !== key);
    if (!updates.length) return [];
    return [sql`
      UPDATE ${sql.table(table)} AS t SET ${sql.join(updates.map((c) => sql`${sql.ref(c)} = y.${sql.ref(c)}`))}
      FROM (SELECT ${typed(columns, types)} FROM ${rowsFrom(group, columns, types)}) AS y
      WHERE t.${sql.ref(key)} = y.${sql.ref(key)}
      ${returning ? sql`RETURNING t.${sql.ref(key)}` : sql``}
    `];
  });
}
