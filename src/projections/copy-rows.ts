import { CompiledQuery, type Kysely } from 'kysely';
import { CopyData } from '../db/copy-from.ts';
import { storableText } from '../lib/input-checks.ts';
import { byColumns, type ColumnTypes, type Row } from './bulk-write.ts';
import { binaryRows, jsonValue } from './copy-binary.ts';

/**
 * A character COPY's text format reads as a delimiter, a row's end or an escape, or
 * one Postgres may not store (NUL, a surrogate: storableText has the exact rule).
 */
const SPECIAL_OR_UNSTORABLE = /[\\\n\r\t\u0000\ud800-\udfff]/;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const NULL = '\\N';

/** Binary unless a value has no binary form here (`binaryRows`); text for comparisons and tests. */
export type CopyFormat = 'text' | 'binary';

/** A text value in COPY's text format; what no Postgres text can hold becomes U+FFFD. */
function copyText(value: string): string {
  if (!SPECIAL_OR_UNSTORABLE.test(value)) return value;
  return storableText(value).replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c]!);
}

/**
 * A value's JSON in COPY's text format, as `columnJson` has it (a JSON null is NULL).
 * JSON text holds no raw line breaks or tabs, and whatever Postgres refuses in it is an
 * escape: text without a backslash needs nothing more.
 */
function copyJson(value: unknown): string {
  const text = jsonValue(value);
  if (text === null) return NULL;
  return text.includes('\\') ? text.replaceAll('\\', '\\\\') : text;
}

/**
 * One column value, read by Postgres as `upsertRows` has it read the same value from
 * its JSON array: null is NULL, json and jsonb columns take the value's JSON, other
 * columns its text (a string as it is, anything else as JSON).
 */
function copyValue(value: unknown, json: boolean): string {
  if (value === null || value === undefined) return NULL;
  if (json) return copyJson(value);
  if (typeof value === 'string') return copyText(value);
  return value instanceof Date ? copyText(value.toISOString()) : copyJson(value);
}

/**
 * `COPY table (columns) FROM STDIN` with its rows, run on a kysely connection of
 * `connectDb` (`kyselyOn`), which sends them by COPY on the transaction's own
 * connection. Each run is a fresh protocol exchange over the same encoded rows.
 */
export class CopyIn {
  readonly text: string;
  /** The rows in the format the statement names (text or binary). */
  readonly bytes: Buffer;

  constructor(text: string, bytes: Buffer) {
    this.text = text;
    this.bytes = bytes;
  }

  async execute(db: Kysely<any>): Promise<void> {
    await db.executeQuery(CompiledQuery.raw(this.text, [new CopyData(this.bytes)]));
  }
}

/**
 * The rows as COPY statements, one per column set (a column a row lacks takes its
 * default, as with `upsertRows`). Only for rows whose key no row has yet: a key that
 * exists fails the statement, and with it the transaction.
 */
export function copyRows(table: string, rows: Row[], types: ColumnTypes, format: CopyFormat = 'binary'): CopyIn[] {
  return [...byColumns(rows).values()].map((group) => {
    const columns = Object.keys(group[0]!);
    const statement = `COPY ${quoteIdent(table)} (${columns.map(quoteIdent).join(', ')}) FROM STDIN`;
    const binary = format === 'binary' ? binaryRows(group, columns, columns.map((c) => types[c] ?? 'unknown')) : null;
    if (binary) return new CopyIn(`${statement} (FORMAT binary)`, binary);
    const json = columns.map((c) => types[c] === 'json' || types[c] === 'jsonb');
    let data = '';
    for (const row of group) {
      for (let i = 0; i < columns.length; i++) data += (i ? '\t' : '') + copyValue(row[columns[i]!], json[i]!);
      data += '\n';
    }
    return new CopyIn(statement, Buffer.from(data));
  });
}

/**
 * The COPY with FREEZE: its rows go in frozen, visible to all and with no hint bits for
 * a reader to set. Postgres takes it only for a table created or truncated in the same
 * (sub)transaction (load-transaction.ts).
 */
export const frozen = (copy: string): string => (copy.endsWith(')') ? `${copy.slice(0, -1)}, FREEZE)` : `${copy} (FREEZE)`);

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;
