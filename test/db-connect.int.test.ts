import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { sql } from 'kysely';
import { connectDb } from '../src/db/connect.ts';
import { createTestDatabase } from './support/postgres.ts';

test('a session ended while its client is checked out does not crash the process; the pool goes on with a new one', async (t) => {
  const database = await createTestDatabase();
  const { db, pool } = connectDb(database.url, 2);
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  t.after(async () => {
    await admin.end();
    await db.destroy();
    await database.drop();
  });

  const client = await pool.connect();
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const ended = new Promise((r) => client.once('end', r));
  // Ended between two queries, as a Postgres restart or pg_terminate_backend does: pg-pool has no listener on a checked-out client.
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  await ended;
  await assert.rejects(client.query('SELECT 1'));
  client.release();
  const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(db);
  assert.equal(rows[0]!.one, 1);
});
