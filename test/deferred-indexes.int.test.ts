import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { connectDb, type Db } from '../src/db/connect.ts';
import { buildIndexes, dropSecondaryIndexes } from '../src/db/deferred-indexes.ts';
import { migrate } from '../src/db/migrations.ts';
import { createTestDatabase } from './support/postgres.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;
before(async () => {
  database = await createTestDatabase();
  db = connectDb(database.url, 2).db;
  await migrate(db);
});
after(async () => {
  await db.destroy();
  await database.drop();
});

const indexes = async () =>
  (await sql<{ def: string }>`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`.execute(db)).rows.map((r) => r.def);

test('a rebuild loads with primary keys, unique indexes and the source lookup only, and ends with every index the migrations made', async () => {
  const migrated = await indexes();
  const deferred = await dropSecondaryIndexes(db);
  const during = await indexes();
  // What the load needs stays: upserts' keys, uniqueness, a deleted source's executions.
  assert.ok(during.some((d) => d.includes('tasks_pkey')));
  assert.ok(during.some((d) => d.includes('monitors_token_key')));
  assert.ok(during.some((d) => d.includes('executions_source_scheduled')));
  assert.ok(!during.some((d) => d.includes('executions_org_scheduled')));
  assert.ok(!during.some((d) => d.includes('tasks_org_lane')));
  assert.deepEqual([...during, ...deferred].sort(), [...migrated].sort());
  await buildIndexes(db, deferred);
  assert.deepEqual(await indexes(), migrated);
});
