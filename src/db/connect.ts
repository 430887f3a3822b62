import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import { CopyData, sendCopy } from './copy-from.ts';
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
  return { db: kyselyOn<Database>(pool), pool };
}

/**
 * kysely over `pool`, whose clients run a statement with a `CopyData` parameter as
 * `COPY … FROM STDIN` with those rows (`CopyIn` in `src/projections/copy-rows.ts`), on
 * the connection of the transaction it is part of.
 */
export function kyselyOn<T>(pool: pg.Pool): Kysely<T> {
  // One face per client: kysely keeps its connection objects by client.
  const faces = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  // Only `query(text, parameters)` is called: no cursor is configured.
  const faceOf = (client: pg.PoolClient) => ({
    query(text: string, parameters: readonly unknown[]) {
      const [first] = parameters;
      return first instanceof CopyData && parameters.length === 1 ? sendCopy(client, text, first.bytes) : client.query(text, parameters as unknown[]);
    },
    release: () => client.release(),
  }) as unknown as PostgresPoolClient;
  const copying: PostgresPool = {
    async connect() {
      const client = await pool.connect();
      let face = faces.get(client);
      if (!face) faces.set(client, (face = faceOf(client)));
      return face;
    },
    end: () => pool.end(),
  };
  return new Kysely<T>({ dialect: new PostgresDialect({ pool: copying }) });
}
