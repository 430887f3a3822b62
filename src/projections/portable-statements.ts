import { CompiledQuery, DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type RawBuilder } from 'kysely';
import { CopyOrUpsert, type Statement } from './batch.ts';
import { CopyIn, frozen } from './copy-rows.ts';

/**
 * A batch's statement as plain data, for a thread that prepares batches to hand to the
 * one that writes them (`postMessage`): SQL with its parameters, or a COPY with its
 * encoded rows, whose bytes move between threads without a copy.
 */
export type PortableStatement =
  | { sql: string; parameters: readonly unknown[] }
  | { copy: string; data: Uint8Array };

/** Compiles kysely's SQL without a database: the writing thread runs the compiled text as it is. */
export const compiler = new Kysely<any>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/**
 * The statements as plain data, and the buffers a `postMessage` may move rather than
 * copy: only those that own their memory whole (a pooled Buffer shares it with others,
 * which moving would take from under them).
 *
 * A CopyOrUpsert goes as its COPY alone: a key that exists already then fails the
 * transaction, and the writer's careful path (one commit at a time, by upserts) takes
 * that batch again, so the rows are the same and the rare upserts are never encoded here.
 */
export function toPortable(statements: Statement[]): { statements: PortableStatement[]; transfer: ArrayBuffer[] } {
  const out: PortableStatement[] = [];
  const transfer: ArrayBuffer[] = [];
  const copy = (c: CopyIn) => {
    const data = c.bytes;
    if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer) transfer.push(data.buffer);
    out.push({ copy: c.text, data });
  };
  for (const s of statements) {
    if (s instanceof CopyIn) copy(s);
    else if (s instanceof CopyOrUpsert) s.copies.forEach(copy);
    else {
      const { sql, parameters } = (s as RawBuilder<unknown>).compile(compiler);
      out.push({ sql, parameters });
    }
  }
  return { statements: out, transfer };
}

/** What `toPortable` gave, runnable again on the writing thread's transaction; `freeze`: its COPYs with FREEZE (`frozen`). */
export function fromPortable(statements: PortableStatement[], opts: { freeze?: boolean } = {}): Statement[] {
  return statements.map((s) => {
    if ('copy' in s) return new CopyIn(opts.freeze ? frozen(s.copy) : s.copy, Buffer.from(s.data.buffer, s.data.byteOffset, s.data.byteLength));
    const query = CompiledQuery.raw(s.sql, [...s.parameters]);
    return { execute: (db) => db.executeQuery(query) };
  });
}
