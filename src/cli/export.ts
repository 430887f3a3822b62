import { createWriteStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { sql } from 'kysely';
import { fileWriter, ParquetWriter } from 'hyparquet-writer';
import { connectDb, type Db } from '../db/connect.ts';
import { CommandError } from '../lib/errors.ts';
import { UsageError } from './args.ts';

/**
 * `jetcron export --table NAME [--schema S] --format csv|jsonl|parquet --out FILE`: a
 * projection's table for other tools. Rows are read with a cursor, 10,000 at a time, so
 * a table larger than memory exports. Parquet through hyparquet-writer (pure JS, one
 * row group per fetch; chosen over DuckDB by the comparison in docs/analysts.md).
 */

export const FORMATS = ['csv', 'jsonl', 'parquet'] as const;
export type ExportFormat = (typeof FORMATS)[number];
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const FETCH = 10_000;

interface Column {
  name: string;
  /** Postgres's `data_type` (information_schema). */
  type: string;
}

type Kind = 'int' | 'bigint' | 'float' | 'bool' | 'time' | 'json' | 'text';

function kindOf(type: string): Kind {
  if (type === 'smallint' || type === 'integer') return 'int';
  if (type === 'bigint') return 'bigint';
  if (type === 'real' || type === 'double precision') return 'float';
  if (type === 'boolean') return 'bool';
  if (type.startsWith('timestamp')) return 'time';
  if (type === 'json' || type === 'jsonb') return 'json';
  // numeric, date, text, uuid, arrays, anything else: its text, as Postgres writes it.
  return 'text';
}

/** What each column is selected as: the ones JavaScript would lose precision or time zone on come as text. */
function selectList(columns: Column[]) {
  return sql.join(columns.map((c) => {
    const kind = kindOf(c.type);
    return kind === 'bigint' || kind === 'text' ? sql`${sql.id(c.name)}::text AS ${sql.id(c.name)}` : sql.id(c.name);
  }));
}

/** A value as JSON writes it: a bigint that fits a number is a number. */
function jsonValue(kind: Kind, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (kind === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v;
  if (kind === 'time') return (v as Date).toISOString();
  return v;
}

function csvField(kind: Kind, v: unknown): string {
  if (v === null || v === undefined) return '';
  const text = kind === 'time' ? (v as Date).toISOString() : kind === 'json' ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

const PARQUET_TYPES: Record<Kind, { type: 'INT32' | 'INT64' | 'DOUBLE' | 'BOOLEAN' | 'BYTE_ARRAY'; converted_type?: 'UTF8' | 'JSON' | 'TIMESTAMP_MILLIS' }> = {
  int: { type: 'INT32' },
  bigint: { type: 'INT64' },
  float: { type: 'DOUBLE' },
  bool: { type: 'BOOLEAN' },
  time: { type: 'INT64', converted_type: 'TIMESTAMP_MILLIS' },
  json: { type: 'BYTE_ARRAY', converted_type: 'JSON' },
  text: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
};

function parquetValue(kind: Kind, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (kind === 'bigint') return BigInt(v as string);
  if (kind === 'time') return BigInt((v as Date).getTime());
  if (kind === 'json') return JSON.stringify(v);
  return v;
}

interface Sink {
  rows(batch: Record<string, unknown>[]): Promise<void>;
  close(): Promise<void>;
}

async function write(out: WriteStream, text: string): Promise<void> {
  if (!out.write(text)) await once(out, 'drain');
}

async function closeStream(out: WriteStream): Promise<void> {
  out.end();
  await once(out, 'close');
}

function textSink(format: 'csv' | 'jsonl', file: string, columns: Column[]): Sink {
  const out = createWriteStream(file);
  const kinds = columns.map((c) => kindOf(c.type));
  let header = format === 'csv' ? `${columns.map((c) => csvField('text', c.name)).join(',')}\r\n` : '';
  return {
    async rows(batch) {
      const lines = batch.map((row) => (format === 'csv'
        ? `${columns.map((c, i) => csvField(kinds[i]!, row[c.name])).join(',')}\r\n`
        : `${JSON.stringify(Object.fromEntries(columns.map((c, i) => [c.name, jsonValue(kinds[i]!, row[c.name])])))}\n`));
      await write(out, header + lines.join(''));
      header = '';
    },
    async close() {
      if (header) await write(out, header);
      await closeStream(out);
    },
  };
}

function parquetSink(file: string, columns: Column[]): Sink {
  const kinds = columns.map((c) => kindOf(c.type));
  const schema = [
    { name: 'root', num_children: columns.length },
    ...columns.map((c, i) => ({ name: c.name, repetition_type: 'OPTIONAL' as const, ...PARQUET_TYPES[kinds[i]!] })),
  ];
  const writer = new ParquetWriter({ writer: fileWriter(file), schema, createdBy: 'jetcron export' });
  return {
    async rows(batch) {
      writer.write({
        columnData: columns.map((c, i) => ({ name: c.name, data: batch.map((row) => parquetValue(kinds[i]!, row[c.name])) as never })),
        rowGroupSize: batch.length,
      });
    },
    async close() {
      writer.finish();
    },
  };
}

export interface ExportCommand {
  table: string;
  schema: string;
  format: ExportFormat;
  out: string;
}

export function exportCommand(flags: Map<string, string>): ExportCommand {
  const table = flags.get('table');
  const out = flags.get('out');
  if (!table || !IDENTIFIER.test(table)) throw new UsageError('--table NAME is required: a table name (letters, digits, _)');
  const schema = flags.get('schema') ?? 'analytics';
  if (!IDENTIFIER.test(schema)) throw new UsageError(`--schema must be a schema name (letters, digits, _), got "${schema}"`);
  if (!out) throw new UsageError('--out FILE is required');
  const format = flags.get('format');
  if (!format || !(FORMATS as readonly string[]).includes(format)) throw new UsageError(`--format must be one of ${FORMATS.join(', ')}`);
  return { table, schema, format: format as ExportFormat, out };
}

/** Writes the table; answers how many rows. */
export async function exportTable(databaseUrl: string, cmd: ExportCommand): Promise<{ rows: number }> {
  const { db } = connectDb(databaseUrl, 1);
  try {
    return await exportWith(db, cmd);
  } finally {
    await db.destroy();
  }
}

async function exportWith(db: Db, cmd: ExportCommand): Promise<{ rows: number }> {
  const columns = (await sql<Column>`SELECT column_name AS name, data_type AS type FROM information_schema.columns
    WHERE table_schema = ${cmd.schema} AND table_name = ${cmd.table} ORDER BY ordinal_position`.execute(db)).rows;
  if (!columns.length) throw new ExportRefused(`no table ${cmd.schema}.${cmd.table} (a projection's tables are in schema analytics unless its replay said --schema)`);
  const sink = cmd.format === 'parquet' ? parquetSink(cmd.out, columns) : textSink(cmd.format, cmd.out, columns);
  let rows = 0;
  try {
    await db.transaction().execute(async (trx) => {
      await sql`DECLARE export_rows NO SCROLL CURSOR FOR SELECT ${selectList(columns)} FROM ${sql.table(`${cmd.schema}.${cmd.table}`)}`.execute(trx);
      for (;;) {
        const batch = (await sql<Record<string, unknown>>`FETCH ${sql.raw(String(FETCH))} FROM export_rows`.execute(trx)).rows;
        if (!batch.length) break;
        await sink.rows(batch);
        rows += batch.length;
      }
    });
  } finally {
    await sink.close();
  }
  return { rows };
}

export class ExportRefused extends CommandError {}
