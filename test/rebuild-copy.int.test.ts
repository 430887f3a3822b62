/**
 * A rebuild writes the rows a batch creates by COPY (the fast path) and everything else,
 * and any batch whose commit fails, by upserts (the careful path, the live projector's
 * only one). Over one log holding old single-event messages and commits, both give the
 * same rows, whatever the batch sizes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import type { Nats } from '../src/nats/connection.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { applyEvent } from '../src/projections/apply-event.ts';
import { ProjectionBatch } from '../src/projections/batch.ts';
import { attemptsOf } from '../src/projections/attempt-rows.ts';
import { CopyIn } from '../src/projections/copy-rows.ts';
import { readCheckpoint, runProjection, type ProjectionOptions } from '../src/projections/projector.ts';
import { createTestDatabase } from './support/postgres.ts';
import { appendLog, at, AWKWARD, ev, finished, history, ORG, task, type LogMessage } from './support/rebuild-history.ts';
import { rowsOf } from './support/read-model-rows.ts';
import { startNatsWithStreams } from './support/nats.ts';

let stack: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
const databases: { drop(): Promise<void> }[] = [];
const dbs: Db[] = [];
before(async () => {
  stack = await startNatsWithStreams();
  nats = await stack.connect('rebuild-copy test');
});
after(async () => {
  for (const db of dbs) await db.destroy();
  for (const d of databases) await d.drop();
  await stack.stop();
});

const append = (messages: LogMessage[]) => appendLog(nats, messages);

async function freshDb(): Promise<{ db: Db; url: string }> {
  const database = await createTestDatabase();
  databases.push(database);
  const { db } = connectDb(database.url, 2);
  dbs.push(db);
  return { db, url: database.url };
}

/** Projects the whole log into a fresh database with these options; the log lines it wrote. */
async function project(target: number, opts: ProjectionOptions): Promise<{ db: Db; logged: string[] }> {
  const { db } = await freshDb();
  await migrate(db);
  const logged: string[] = [];
  const log = (m: string) => logged.push(m);
  const supervisor = await openSupervisor(nats, log);
  const run = new AbortController();
  const projecting = runProjection({ nats, db, log, supervisor }, run.signal, opts);
  try {
    while ((await readCheckpoint(db)) < target) await new Promise((r) => setTimeout(r, 20));
  } finally {
    run.abort();
    await projecting;
    supervisor.close();
  }
  return { db, logged };
}

test('a batch writes what it creates by COPY only when asked (inbound event rows always: their own test below), and the rest by upserts', () => {
  const batch = new ProjectionBatch();
  for (const m of history().slice(0, 12)) for (const e of m.type === 'Commit' ? m.events : [m]) applyEvent(batch, e as JetcronEvent);
  const copies = (statements: unknown[]) => statements.filter((s): s is CopyIn => s instanceof CopyIn).map((s) => s.text.split(' ')[1]);
  assert.deepEqual(copies(batch.statements()), []);
  assert.deepEqual(new Set(copies(batch.statements({ copyCreated: true }))), new Set(['"tasks"', '"executions"', '"execution_attempts"', '"pings"']));
});

test('COPY and upserts give the same rows over old single events and commits, live batch sizes or a rebuild\'s', async () => {
  const target = await append(history());
  const live = await project(target, { maxBatch: 3, copyCreated: false });
  const careful = await rowsOf(live.db);
  assert.equal(careful.tasks!.length, 24 - 3, 'three tasks deleted');
  assert.equal(careful.execution_attempts!.length, 8, 'a row for each attempt a retry followed; the last ones are their executions\' rows');
  assert.ok(careful.pings!.some((p: any) => p.body.includes('\ufffd') && p.body.includes('\t')), 'NUL and a lone surrogate stored as U+FFFD, the tab as it is');
  assert.equal(careful.inbound_events!.length, 0, "the deleted endpoint's events went with it");

  // The live projector's default (COPY, one commit at a time) and a rebuild's.
  for (const opts of [{ maxBatch: 3 }, ...[2, 7, 10_000].map((maxBatch) => ({ pipelined: true, copyCreated: true, maxBatch }))]) {
    const maxBatch = JSON.stringify(opts);
    const fast = await project(target, opts);
    assert.ok(!fast.logged.some((l) => l.includes('failed')), fast.logged.join('\n'));
    assert.deepEqual(await rowsOf(fast.db), careful, `batches of ${maxBatch}`);
  }

  // The CLI's own rebuild (drop, migrate, secondary indexes dropped and built again).
  const { db, url } = await freshDb();
  const printed: unknown[] = [];
  await rebuildProjections({ natsUrl: stack.url, databaseUrl: url, dataDir: '/nonexistent', log: () => {}, print: (o) => printed.push(o) });
  assert.equal((printed[0] as { rebuilt: boolean }).rebuilt, true);
  assert.deepEqual(await rowsOf(db), careful);
});

test('a row that exists already fails the COPY; that batch goes again by upserts and the rows are what live gives', async () => {
  // The same task created twice (a second message with its own id): the second create finds its rows there.
  const t = task(500);
  const create = (id: string) => ({ ...(ev('TaskCreated', { task: t, execution: t.pending_execution }) as object), id }) as JetcronEvent;
  const source = { type: 'task', id: t.id, name: t.name };
  const target = await append([create('evt_copy_dup_a'), finished(t.pending_execution.id, source, 1, true, null), ev('TaskUpdated', { task: { ...t, name: 'later' }, changed: ['name'] }), create('evt_copy_dup_b')]);
  const live = await rowsOf((await project(target, { maxBatch: 1, copyCreated: false })).db);
  const fast = await project(target, { pipelined: true, copyCreated: true, maxBatch: 2 });
  assert.ok(fast.logged.some((l) => /pipelined commit through seq \d+ failed \(duplicate key/.test(l)), fast.logged.join('\n'));
  assert.deepEqual(await rowsOf(fast.db), live);
  // The live projector (COPY by default, one commit at a time): the refused batch goes again at once by upserts, nothing is recorded as failed.
  const liveCopy = await project(target, { maxBatch: 1 });
  assert.ok(!liveCopy.logged.some((l) => /fail|SKIPPED/i.test(l)), liveCopy.logged.join('\n'));
  assert.deepEqual(await rowsOf(liveCopy.db), live);
});

test("an execution's attempts: rows for those a retry followed, the last from its own row, kept as a row when a cancel follows it", async () => {
  const exes = ['retried', 'cancelled-after', 'cancelled-pending'].map((name, i) => ({ name, t: task(600 + i) }));
  const [retried, after, pending] = exes.map(({ t }) => ({ t, exe: t.pending_execution.id, source: { type: 'task', id: t.id, name: t.name } }));
  const cancel = (exe: string, source: unknown) => ev('ExecutionCancelled', { execution_id: exe, source, reason: 'task deleted', lane: null });
  const target = await append([
    ...exes.map(({ t }) => ev('TaskCreated', { task: t, execution: t.pending_execution })),
    finished(retried!.exe, retried!.source, 1, false, at()), finished(retried!.exe, retried!.source, 2, true, null),
    finished(after!.exe, after!.source, 1, true, null), cancel(after!.exe, after!.source),
    finished(pending!.exe, pending!.source, 1, false, at()), cancel(pending!.exe, pending!.source),
  ]);
  const expected = {
    [retried!.exe]: { status: 'success', attempts: [[1, 'failed'], [2, 'success']] },
    [after!.exe]: { status: 'cancelled', attempts: [[1, 'success']] },
    [pending!.exe]: { status: 'cancelled', attempts: [[1, 'failed']] },
  };
  // One event per commit (each cancel lands on a row written before), and every event in one batch.
  for (const opts of [{ maxBatch: 1 }, { pipelined: true, copyCreated: true, maxBatch: 10_000 }] as ProjectionOptions[]) {
    const { db } = await project(target, opts);
    for (const [id, want] of Object.entries(expected)) {
      const row = await db.selectFrom('executions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      const rows = await db.selectFrom('execution_attempts').selectAll().where('execution_id', '=', id).orderBy('attempt').execute();
      const got = attemptsOf(row, rows).map((a) => [a.attempt, a.status]);
      assert.deepEqual({ status: row.status, attempts: got }, want, `${id} with ${JSON.stringify(opts)}`);
    }
  }
});

test('inbound event rows go in by COPY, by upserts when a key is there already (the later event wins, as live upserts had it), and none for an endpoint that is gone', async () => {
  const created = at();
  const endpoint = {
    id: 'ep_copy_keep', org_id: ORG, slug: 'in-keep', name: 'kept', forward_urls: [], retry_attempts: 5, use_lane: false, enabled: true,
    forward_method: null, forward_headers: null, forward_body: null, on_failure_url: null, on_recovery_url: null, notify_on_failure: null, notify_on_recovery: null,
    script: null, paused: false, secret_names: [], sealed_secrets: null, created_at: created, updated_at: created,
  };
  const received = (id: string, endpointId: string, outcome: string) => ev('InboundEventReceived', {
    event: { id, endpoint_id: endpointId, method: 'POST', path: '/in/keep', query: AWKWARD, source_ip: null, received_at: at(), body_size: 3, inbound_seq: 7, outcome, script_logs: [AWKWARD], error_message: AWKWARD },
    endpoint: { id: endpointId, name: 'kept', use_lane: false, retry_attempts: 5 }, executions: [],
  });
  const target = await append([
    ev('EndpointCreated', { endpoint }),
    received('evt_copy_keep_1', endpoint.id, 'collected'), received('evt_copy_keep_2', endpoint.id, 'collected'),
    received('evt_copy_never', 'ep_copy_never', 'collected'),
    // The same key again (a batch projected a second time looks so to Postgres).
    received('evt_copy_keep_1', endpoint.id, 'filtered'),
  ]);
  const results = [];
  for (const opts of [{ maxBatch: 1 }, { maxBatch: 10_000 }, { pipelined: true, copyCreated: true, maxBatch: 2 }] as ProjectionOptions[]) {
    const run = await project(target, opts);
    // (The log holds the other tests' messages too: a duplicate task, whose COPY fails a pipelined commit.)
    assert.ok(!run.logged.some((l) => l.includes('inbound')), run.logged.join('\n'));
    const rows = await run.db.selectFrom('inbound_events').selectAll().where('id', 'like', 'evt_copy_%').orderBy('id').execute();
    results.push(rows);
    assert.deepEqual(rows.map((r) => [r.id, r.outcome]), [['evt_copy_keep_1', 'filtered'], ['evt_copy_keep_2', 'collected']], JSON.stringify(opts));
    assert.equal(rows[1]!.query, AWKWARD.replace('\u0000', '\ufffd').replace('\ud800', '\ufffd'));
    assert.deepEqual(rows[1]!.script_logs, [AWKWARD.replace('\u0000', '\ufffd').replace('\ud800', '\ufffd')]);
    assert.equal(rows[1]!.source_ip, null);
  }
  assert.deepEqual(results[1], results[0]);
  assert.deepEqual(results[2], results[0]);
});
