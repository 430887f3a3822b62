/**
 * COPY's binary format against its text format: every column of every table the
 * projections COPY into, over awkward values, reads back the same rows; a value without
 * a binary form here sends its rows as text; the column types the batch declares are
 * the tables' own (a binary value of the wrong type would be misread or refused). And
 * the rows reach Postgres whole, or are refused without harm to the connection (below).
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

// The sending side (`src/db/copy-from.ts`, pg-copy-streams), as the projector runs it:
// rows spanning many CopyData messages arrive whole; a COPY Postgres refuses part-way,
// with tens of megabytes still to send, rejects with Postgres's error and leaves its
// connection usable for the rest of the transaction. The refusal is the projector's
// everyday path (a key that exists sends the batch's rows by upserts instead), and it is
// where pg-copy-streams, handed its rows faster than the socket takes them, writes to a
// connection it has already let go of and throws where nothing can catch it: this file
// then dies with an uncaught exception.

const SENT_TYPES = { id: 'text', body: 'text' };
/** 40,000 rows of 1 KB: far more than the socket and Postgres hold in their buffers. */
const ROWS = 40_000;
const sentRows = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ id: `r${from + i}`, body: `${from + i}:`.padEnd(1000, 'x') }));

/** The table the rows go to, empty. */
async function emptySent(): Promise<void> {
  await sql`CREATE TABLE IF NOT EXISTS sent (id text PRIMARY KEY, body text NOT NULL)`.execute(db);
  await sql`TRUNCATE sent`.execute(db);
}
const sentCount = async () => (await sql<{ n: string; bytes: string }>`SELECT count(*) AS n, coalesce(sum(length(body)), 0) AS bytes FROM sent`.execute(db)).rows[0]!;

test('rows spanning many CopyData messages go in whole, binary and text', async () => {
  for (const format of ['binary', 'text'] as const) {
    await emptySent();
    const copies = copyRows('sent', sentRows(0, ROWS), SENT_TYPES, format);
    assert.equal(copies.length, 1);
    assert.ok(copies[0]!.bytes.length > 30 * (1 << 20), `${copies[0]!.bytes.length} bytes: thirty messages or more`);
    await db.transaction().execute(async (trx) => {
      for (const copy of copies) await copy.execute(trx);
    });
    assert.deepEqual(await sentCount(), { n: String(ROWS), bytes: String(ROWS * 1000) }, format);
  }
});

test('a COPY refused part-way rejects with the unique violation, and its transaction goes on after the savepoint', async () => {
  await emptySent();
  await sql`INSERT INTO sent VALUES ('r0', 'there before')`.execute(db);
  // The refusal comes at the first rows; everything after them is still on its way.
  const [copy] = copyRows('sent', sentRows(0, ROWS), SENT_TYPES);
  await db.transaction().execute(async (trx) => {
    await sql`SAVEPOINT copy_or_upsert`.execute(trx);
    await assert.rejects(copy!.execute(trx), (err: { code?: string }) => err.code === '23505');
    await sql`ROLLBACK TO SAVEPOINT copy_or_upsert`.execute(trx);
    await sql`INSERT INTO sent VALUES ('after', 'the refusal')`.execute(trx);
  });
  // Answered after every byte before it has left the socket: a late write of the refused COPY would have thrown by now.
  assert.deepEqual((await sql<{ id: string }>`SELECT id FROM sent ORDER BY id`.execute(db)).rows.map((r) => r.id), ['after', 'r0']);
  // And the connection copies again.
  await db.transaction().execute((trx) => copyRows('sent', sentRows(1, 10), SENT_TYPES)[0]!.execute(trx));
  assert.equal((await sentCount()).n, '12');
});

test('a COPY refused before its rows (no such table) rejects, and the connection goes on', async () => {
  const [copy] = copyRows('not_there', sentRows(0, ROWS), SENT_TYPES);
  await assert.rejects(db.transaction().execute((trx) => copy!.execute(trx)), (err: { code?: string }) => err.code === '42P01');
  const { rows: one } = await sql<{ one: number }>`SELECT 1 AS one`.execute(db);
  assert.equal(one[0]!.one, 1);
});
