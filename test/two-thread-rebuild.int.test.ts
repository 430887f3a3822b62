/**
 * A rebuild on two threads: the preparing thread reads, decodes and encodes batches,
 * this one writes them. The rows are the careful path's; the batches come in order,
 * whole messages each; a message the preparing thread cannot take and a commit Postgres
 * refuses go through the careful path (recorded and skipped as the live projector
 * does); a preparing thread that dies fails the rebuild with a clear error and leaves
 * the checkpoint at the last batch written, from which a new run gives the same rows.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate, PROJECTED_TABLES } from '../src/db/migrations.ts';
import type { Nats } from '../src/nats/connection.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { BATCHES_AHEAD, type PreparedMessage } from '../src/projections/prepare-protocol.ts';
import { readCheckpoint, runProjection } from '../src/projections/projector.ts';
import { projectOnTwoThreads, startPrepareThread, type TwoThreadOptions } from '../src/projections/two-thread-rebuild.ts';
import { STREAMS } from '../streams/definitions.ts';
import { createTestDatabase } from './support/postgres.ts';
import { rowsOf } from './support/read-model-rows.ts';
import { appendLog, ev, history, ORG } from './support/rebuild-history.ts';
import { startNatsWithStreams } from './support/nats.ts';

let stack: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
const databases: { drop(): Promise<void> }[] = [];
const dbs: Db[] = [];
/** The log's last sequence, and the rows the careful path (the live projector's, one event a commit) gives for it. */
let target: number;
let careful: Record<string, unknown[]>;

async function freshDb(): Promise<{ db: Db; url: string }> {
  const database = await createTestDatabase();
  databases.push(database);
  const { db } = connectDb(database.url, 2);
  dbs.push(db);
  await migrate(db);
  return { db, url: database.url };
}

/** The tables a rebuild loads in one transaction (each test's database is fresh, as a rebuild's). */
const FRESH = PROJECTED_TABLES;

/** The log through `through` projected on two threads into `db` (in the load transaction unless `freshTables: []`); what it logged. */
async function twoThreads(db: Db, opts: Partial<TwoThreadOptions> & { signal?: AbortSignal } = {}): Promise<string[]> {
  const logged: string[] = [];
  const log = (m: string) => logged.push(m);
  const supervisor = await openSupervisor(nats, log);
  try {
    await projectOnTwoThreads({ nats, db, log, supervisor }, opts.signal ?? new AbortController().signal, { natsUrl: stack.url, through: target, maxBatch: 5, freshTables: FRESH, ...opts });
  } finally {
    supervisor.close();
  }
  return logged;
}

before(async () => {
  stack = await startNatsWithStreams();
  nats = await stack.connect('two-thread rebuild test');
  target = await appendLog(nats, history());
  const { db } = await freshDb();
  const supervisor = await openSupervisor(nats, () => {});
  await runProjection({ nats, db, log: () => {}, supervisor }, new AbortController().signal, { maxBatch: 1, copyCreated: false, through: target });
  supervisor.close();
  careful = await rowsOf(db);
});
after(async () => {
  for (const db of dbs) await db.destroy();
  for (const d of databases) await d.drop();
  await stack.stop();
});

test('the preparing thread hands on BATCHES_AHEAD batches, then one more for each one written, then says it reached the end', async () => {
  const thread = startPrepareThread({ natsUrl: stack.url, stream: STREAMS.events.name, startSeq: 1, through: target, maxBatch: 3 });
  const received: PreparedMessage[] = [];
  let arrived: (() => void) | undefined;
  thread.on('message', (m: PreparedMessage) => {
    received.push(m);
    arrived?.();
  });
  const next = async (): Promise<PreparedMessage> => {
    while (!received.length) await new Promise<void>((r) => (arrived = r));
    return received.shift()!;
  };
  const batches: { first: number; last: number; events: number }[] = [];
  try {
    for (;;) {
      const m = await next();
      if (m.type === 'end') break;
      assert.equal(m.type, 'batch');
      if (m.type !== 'batch') continue;
      batches.push({ first: m.first, last: m.last, events: m.events });
      assert.ok(m.statements.length > 0);
      if (batches.length < BATCHES_AHEAD) continue;
      if (batches.length === BATCHES_AHEAD) {
        // Nothing written yet: it waits (a slower machine only makes this likelier to hold).
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(received, [], 'no batch past BATCHES_AHEAD before one is written');
      }
      thread.postMessage({ type: 'written' });
    }
  } finally {
    await thread.terminate();
  }
  assert.equal(batches[0]!.first, 1);
  for (let i = 1; i < batches.length; i++) assert.equal(batches[i]!.first, batches[i - 1]!.last + 1, `batch ${i} follows batch ${i - 1}`);
  assert.equal(batches.at(-1)!.last, target);
  assert.ok(batches.every((b) => b.events >= 3 || b === batches.at(-1)), 'a batch holds maxBatch events at least, but the last');
});

test('two threads give the careful path\'s rows, batches of one event to the whole log in one, in the load transaction and one commit a batch', async () => {
  for (const [maxBatch, freshTables] of [[1, FRESH], [5, FRESH], [10_000, FRESH], [5, []]] as const) {
    const { db } = await freshDb();
    const batches: { first: number; last: number }[] = [];
    const onThread = (thread: Worker) => thread.on('message', (m: PreparedMessage) => {
      if (m.type === 'batch') batches.push({ first: m.first, last: m.last });
    });
    const logged = await twoThreads(db, { maxBatch, onThread, freshTables });
    assert.deepEqual(logged, []);
    assert.equal(batches[0]!.first, 1);
    for (let i = 1; i < batches.length; i++) assert.equal(batches[i]!.first, batches[i - 1]!.last + 1, `batch ${i} follows batch ${i - 1}`);
    assert.equal(batches.at(-1)!.last, target);
    if (maxBatch === 10_000) assert.equal(batches.length, 1);
    else assert.ok(batches.length > 2 * BATCHES_AHEAD, `${batches.length} batches`);
    assert.equal(await readCheckpoint(db), target);
    assert.deepEqual(await rowsOf(db), careful, `batches of ${maxBatch} events, ${freshTables.length ? 'load transaction' : 'one commit a batch'}`);
  }
});

test('a preparing thread that dies fails the projection with a clear error; the checkpoint is at the last batch written, and a new run gives the same rows', async () => {
  const { db } = await freshDb();
  // Stopped when it has handed on its first batch: it cannot have reached the end (it waits for room).
  const onThread = (thread: Worker) => thread.once('message', () => void thread.terminate());
  await assert.rejects(twoThreads(db, { maxBatch: 2, onThread }), /the rebuild's preparing thread stopped \(exit code 1\) before the end of the log/);
  const reached = await readCheckpoint(db);
  assert.ok(reached < target, `checkpoint ${reached} short of ${target}`);
  assert.deepEqual(await twoThreads(db, { maxBatch: 2 }), []);
  assert.equal(await readCheckpoint(db), target);
  assert.deepEqual(await rowsOf(db), careful);
});

test('the CLI\'s rebuild whose preparing thread dies says so, prints nothing, and leaves the checkpoint short (the live projector goes on from there)', async () => {
  const { db, url } = await freshDb();
  const printed: unknown[] = [];
  await assert.rejects(
    rebuildProjections({ natsUrl: stack.url, databaseUrl: url, dataDir: '/nonexistent', log: () => {}, print: (o) => printed.push(o), onThread: (thread) => void thread.terminate() }),
    /the rebuild's preparing thread stopped/,
  );
  assert.deepEqual(printed, []);
  assert.ok((await readCheckpoint(db)) < target);
});

test('lost lease (the signal aborts): both threads stop after the commit in flight, the checkpoint at a batch\'s end', async () => {
  const { db } = await freshDb();
  const lease = new AbortController();
  const onThread = (thread: Worker) => thread.once('message', () => lease.abort());
  assert.deepEqual(await twoThreads(db, { maxBatch: 2, onThread, signal: lease.signal }), []);
  const reached = await readCheckpoint(db);
  assert.ok(reached < target, `checkpoint ${reached} short of ${target}`);
  assert.deepEqual(await twoThreads(db, { maxBatch: 2 }), []);
  assert.deepEqual(await rowsOf(db), careful);
});

// Last: it adds messages to the log the other tests read.
test('a message that does not decode, and an event Postgres refuses, go through the careful path: recorded, skipped, the rest projected', async () => {
  // The refused event first: its batch is the first to fail, inside the load transaction.
  const refused = await appendLog(nats, [ev('ScheduleTicked', {
    schedule: { id: 'sch_refused', org_id: ORG, name: 's', next_run_at: 'not a time', created_at: 'not a time', updated_at: 'not a time' },
    execution: { id: 'exe_refused', scheduled_for: 'not a time', callback_url: null },
  })]);
  const garbage = await nats.publish(`evt.${ORG}.copytest.garbage`, new TextEncoder().encode('{not json'), { msgId: 'garbage' });
  const created = '2026-02-01T00:00:00.000Z';
  target = await appendLog(nats, [ev('OrganizationCreated', { organization: {
    id: 'org_after', name: 'after', plan: 'free', webhook_secret: 'whsec_y', notification_email: null, notification_webhook_url: null,
    notify_on_failure: true, notify_on_recovery: true, created_at: created, updated_at: created,
  } }, 'org_after')]);
  const { db } = await freshDb();
  const logged = await twoThreads(db, { maxBatch: 5 });
  assert.ok(logged.some((l) => l.includes(`seq ${garbage} could not be prepared`)), logged.join('\n'));
  assert.ok(logged.some((l) => l.includes(`SKIPPED seq ${garbage}`)), logged.join('\n'));
  assert.ok(logged.some((l) => /pipelined commit through seq \d+ failed/.test(l)), logged.join('\n'));
  // The refused batch was first inside the load transaction, which rolled back whole.
  assert.ok(logged.some((l) => /failed inside the load transaction.*all of it rolled back/.test(l)), logged.join('\n'));
  assert.ok(logged.some((l) => l.includes(`SKIPPED seq ${refused}`)), logged.join('\n'));
  assert.equal(await readCheckpoint(db), target);
  const { organizations, ...rest } = await rowsOf(db);
  const { organizations: before, ...carefulRest } = careful;
  assert.deepEqual(rest, carefulRest, 'the refused schedule left nothing');
  assert.deepEqual(organizations!.map((o: any) => o.id).sort(), [...before!.map((o: any) => o.id), 'org_after'].sort());
});
