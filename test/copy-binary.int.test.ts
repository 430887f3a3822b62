/**
 * COPY's binary format against its text format: every column of every table the
 * projections COPY into, over awkward values, reads back the same rows; a value without
 * a binary form here sends its rows as text; the column types the batch declares are
 * the tables' own (a binary value of the wrong type would be misread or refused).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import type { ColumnTypes, Row } from '../src/projections/bulk-write.ts';
import { ATTEMPT_TYPES, EXECUTION_TYPES, INBOUND_EVENT_TYPES, PING_TYPES, TASK_TYPES } from '../src/projections/batch.ts';
import { pgMicroseconds } from '../src/projections/copy-binary.ts';
import { copyRows, type CopyFormat } from '../src/projections/copy-rows.ts';
import { createTestDatabase } from './support/postgres.ts';
import { sql } from 'kysely';

const TABLES: Record<string, ColumnTypes> = {
  tasks: TASK_TYPES, executions: EXECUTION_TYPES, execution_attempts: ATTEMPT_TYPES, pings: PING_TYPES, inbound_events: INBOUND_EVENT_TYPES,
};
/** information_schema's udt_name for each ColumnTypes name. */
const UDT: Record<string, string> = { text: 'text', json: 'json', jsonb: 'jsonb', timestamptz: 'timestamptz', integer: 'int4', bigint: 'int8', boolean: 'bool' };

// Indexed text columns take at most ~2,700 bytes; the large json values span CopyData messages (1 MiB each).
const long = 'long '.repeat(400);
const TEXTS: unknown[] = [
  'plain', '', 'ünïcødé ✓ 😀 中文', 'back\\slash\ttab\nnewline\rcr \\N', 'nul\u0000here', 'lone\ud800high', 'lone\udc00low',
  'a'.repeat(48), 'é'.repeat(48), 'x'.repeat(49), long, 42, { not: 'a string' }, new Date('1999-12-31T23:59:59.999Z'),
];
const JSONS: unknown[] = [
  { a: 1, nested: { s: 'q"uote \\ back', u: '✓ 😀', t: 'tab\there' } }, [], [1, 'two', null, -3.5e-7], 'a string', 0, -12, true, false, {},
  { nul: 'x\u0000y', lone: 'a\ud800b', 'kéy ✓': 1 }, { big: Array.from({ length: 60_000 }, (_, i) => ({ i, s: `v${i} é` })) },
];
const TIMES: unknown[] = [
  '2026-11-26T10:00:00.123Z', '2000-01-01T00:00:00.000Z', '1999-12-31T23:59:59.999999Z', '1970-01-01T00:00:00Z', '1900-02-28T12:00:00.5+05:30',
  '1812-06-01T00:00:00.000001-08:00', '2026-02-28T23:59:59.9-00:30', '2255-01-01T00:00:00Z', new Date('1985-03-04T05:06:07.089Z'),
];
const INTEGERS: unknown[] = [0, -1, 1, 2_147_483_647, -2_147_483_648, 200, 30_000];
const BIGINTS: unknown[] = [0, -5, 9_007_199_254_740_991, -9_007_199_254_740_991, 4_294_967_296, 4_294_967_295];
const BOOLEANS: unknown[] = [true, false];
const VALUES: Record<string, unknown[]> = { text: TEXTS, json: JSONS, jsonb: JSONS, timestamptz: TIMES, integer: INTEGERS, bigint: BIGINTS, boolean: BOOLEANS };

let db: Db;
let drop: () => Promise<void>;
before(async () => {
  const database = await createTestDatabase();
  drop = database.drop;
  db = connectDb(database.url, 1).db;
  await migrate(db);
});
after(async () => {
  await db.destroy();
  await drop();
});

async function nullable(table: string): Promise<Set<string>> {
  const { rows } = await sql<{ column_name: string }>`SELECT column_name FROM information_schema.columns WHERE table_name = ${table} AND is_nullable = 'YES'`.execute(db);
  return new Set(rows.map((r) => r.column_name));
}

/** Rows covering every value of each column's type (and NULL where the column allows it); keys unique. */
async function rowsFor(table: string, types: ColumnTypes): Promise<Row[]> {
  const nulls = await nullable(table);
  const columns = Object.keys(types);
  const count = Math.max(...columns.map((c) => VALUES[types[c]!]!.length)) + 1;
  return Array.from({ length: count }, (_, i) => {
    const row: Row = {};
    for (const c of columns) {
      const values = VALUES[types[c]!]!;
      row[c] = i === count - 1 && nulls.has(c) ? null : values[i % values.length];
    }
    // Unique keys (attempts: by execution).
    if ('id' in types) row.id = `row-${i}`;
    if (table === 'execution_attempts') row.execution_id = `exe-${i}`;
    return row;
  });
}

/** The table's rows as Postgres prints them, after COPYing `rows` in `format`; the statements' formats. */
async function copied(table: string, rows: Row[], types: ColumnTypes, format: CopyFormat): Promise<{ rows: string[]; formats: string[] }> {
  const copies = copyRows(table, rows, types, format);
  await db.transaction().execute(async (trx) => {
    await sql`TRUNCATE ${sql.table(table)}`.execute(trx);
    for (const copy of copies) await copy.execute(trx);
  });
  const { rows: out } = await sql<{ r: string }>`SELECT t::text AS r FROM ${sql.table(table)} t ORDER BY 1`.execute(db);
  return { rows: out.map((r) => r.r), formats: copies.map((c) => (c.text.endsWith('(FORMAT binary)') ? 'binary' : 'text')) };
}

test('the batch declares each COPYed column with the type the table has', async () => {
  for (const [table, types] of Object.entries(TABLES)) {
    const { rows } = await sql<{ column_name: string; udt_name: string }>`SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = ${table}`.execute(db);
    const actual = new Map(rows.map((r) => [r.column_name, r.udt_name]));
    for (const [column, type] of Object.entries(types)) assert.equal(actual.get(column), UDT[type], `${table}.${column}`);
  }
});

test('binary COPY reads back the same rows as text COPY: every column of every COPYed table, awkward values, NULLs', async () => {
  for (const [table, types] of Object.entries(TABLES)) {
    const rows = await rowsFor(table, types);
    const text = await copied(table, rows, types, 'text');
    const binary = await copied(table, rows, types, 'binary');
    assert.deepEqual(text.formats, ['text']);
    assert.deepEqual(binary.formats, ['binary'], table);
    assert.equal(binary.rows.length, rows.length);
    assert.deepEqual(binary.rows, text.rows, table);
  }
});

test('rows with a value that has no binary form here go as text, and read back as the text path gives them', async () => {
  const odd = { timestamptz: ['2026-11-26 10:00:00+00', '2026-11-26T10:00:00.1234567Z', '2016-12-31T23:59:60Z', '2026-11-26T10:00:00+0530', 'epoch'], integer: ['17'], bigint: ['12345678901234567'], boolean: ['true', 't'] };
  for (const [type, values] of Object.entries(odd)) {
    const [table, types] = Object.entries(TABLES).find(([, t]) => Object.values(t).includes(type))!;
    const column = Object.keys(types).find((c) => types[c] === type)!;
    for (const value of values) {
      const rows = (await rowsFor(table, types)).slice(0, 3);
      rows[1]![column] = value;
      const text = await copied(table, rows, types, 'text');
      const fallback = await copied(table, rows, types, 'binary');
      assert.deepEqual(fallback.formats, ['text'], `${table}.${column} = ${value}`);
      assert.deepEqual(fallback.rows, text.rows);
    }
  }
});

test("timestamps' microseconds since 2000 are Postgres's own reading of the text", async () => {
  const texts = [...TIMES.filter((t) => typeof t === 'string'), '2024-02-29T00:00:00Z', '1750-03-01T00:00:00.000001+15:59', '2000-01-01T00:00:00.000001-00:01'] as string[];
  for (const t of texts) {
    const { rows } = await sql<{ us: string }>`SELECT (extract(epoch FROM ${t}::timestamptz - '2000-01-01T00:00:00Z'::timestamptz) * 1000000)::bigint::text AS us`.execute(db);
    assert.equal(String(pgMicroseconds(t)), rows[0]!.us, t);
  }
  for (const t of ['2026-02-30T00:00:00Z', '2026-13-01T00:00:00Z', '2026-11-26T24:00:00Z', '2026-11-26T10:00:00Z ', '0099-01-01T00:00:00Z', '2026-11-26T10:00:00+16:00']) {
    assert.equal(pgMicroseconds(t), undefined, t);
  }
});
