import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

export function connectDb(url: string, max = 10): { db: Db; pool: pg.Pool } {
  const pool = new pg.Pool({ connectionString: url, max });
  // A dropped connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // pg-pool listens for errors only on idle clients: a session ended while a client is
  // checked out (a Postgres restart, pg_terminate_backend) would throw as uncaught. The
  // query in flight gets the error; a client no longer queryable is dropped at release.
  pool.on('connect', (client) => client.on('error', () => {}));
  return { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), pool };
}
