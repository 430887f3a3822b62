/**
 * A rebuild writes the rows a batch creates by COPY (the fast path) and everything else,
 * and any batch whose commit fails, by upserts (the careful path, the live projector's
 * only one). Over one log holding old single-event messages and commits, both give the
 * same rows, whatever the batch sizes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import { commitMessage } from '../src/events/commit.ts';
import type { JetcronEvent } from '../src/events/types.ts';
import { encodeJson } from '../src/lib/json.ts';
import type { Nats } from '../src/nats/connection.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { applyEvent } from '../src/projections/apply-event.ts';
import { ProjectionBatch } from '../src/projections/batch.ts';
import { attemptsOf } from '../src/projections/attempt-rows.ts';
import { CopyIn } from '../src/projections/copy-rows.ts';
import { readCheckpoint, runProjection, type ProjectionOptions } from '../src/projections/projector.ts';
import { createTestDatabase } from './support/postgres.ts';
import { rowsOf } from './support/read-model-rows.ts';
import { startNatsWithStreams } from './support/nats.ts';

const ORG = 'org_copytest';
// What COPY's text format and Postgres treat specially: a tab, line breaks, backslashes, NUL, a lone surrogate, `\N`.
const AWKWARD = 'tab\there\nline\r\\N back\\slash nul\u0000 lone\ud800 "quoted" é';
let clock = Date.parse('2026-01-05T10:00:00.000Z');
const at = () => new Date((clock += 1000)).toISOString();
let n = 0;
const ev = (type: string, data: unknown, org = ORG) => ({ type, id: `evt_copy_${++n}`, at: at(), org_id: org, data }) as unknown as JetcronEvent;

function task(i: number, extra: Record<string, unknown> = {}) {
  const created = at();
  return {
    id: `tsk_copy_${i}`, org_id: ORG, name: i % 3 ? `task ${i}` : `task ${AWKWARD}`, url: `https://api.example.com/${i}`, method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Odd': AWKWARD }, body: { n: i, text: AWKWARD }, delay: null, run_at: null, timeout_ms: 30_000,
    retry_attempts: 3, callback_url: null, lane: i % 4 ? null : `lane-${i}`, flow_control: i % 5 ? null : { key: `key-${i % 2}`, parallelism: 2, rate: null, period: null },
    enabled: true, notify_on_failure: null, notify_on_recovery: null, expected_status_codes: null, expected_body_pattern: null, on_failure_url: null,
    on_recovery_url: null, script: null, debounce: null, debounce_key: null, created_at: created, updated_at: created,
    pending_execution: { id: `exe_copy_${i}`, scheduled_for: created, callback_url: null }, ...extra,
  };
}

function finished(executionId: string, source: { type: string; id: string; name: string }, attempt: number, ok: boolean, retryAt: string | null) {
  const done = at();
  return ev('AttemptFinished', {
    execution_id: executionId, source, attempt, status: ok ? 'success' : 'failed', status_code: ok ? 200 : 503, error_message: ok ? null : `HTTP 503 ${AWKWARD}`,
    scheduled_for: done, started_at: done, finished_at: done, duration_ms: 40 + attempt,
    request: { method: 'POST', url: 'https://api.example.com/x', headers: { 'X-Odd': AWKWARD }, body: `{"text":${JSON.stringify(AWKWARD)}}` },
    response_body: ok ? AWKWARD : null, response_truncated: false, response_headers: ok ? { 'content-type': 'text/plain', 'x-odd': AWKWARD } : null,
    script_logs: attempt > 1 ? [AWKWARD, 'second line'] : [], next_attempt_at: retryAt, callback_url: null, push_callback_url: null, lane: null,
  });
}

/** Messages as the log holds them: old single events and commits, side by side. */
function history(): (JetcronEvent | ReturnType<typeof commitMessage>)[] {
  const out: (JetcronEvent | ReturnType<typeof commitMessage>)[] = [];
  const created = at();
  out.push(ev('OrganizationCreated', { organization: { id: ORG, name: 'copy', plan: 'pro', webhook_secret: 'whsec_x', notification_email: null, notification_webhook_url: null, notify_on_failure: true, notify_on_recovery: true, created_at: created, updated_at: created } }));
  const monitor = {
    id: 'mon_copy', org_id: ORG, token: 'tok_copy', name: 'backup', schedule_type: 'interval', interval_seconds: 3600, cron_expression: null, timezone: 'UTC',
    grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null, sync_key: null,
    max_duration_seconds: null, min_duration_seconds: null, slug: null, status: 'new', down_reason: null, paused: false, last_ping_at: null,
    next_expected_at: null, late_at: null, runs: [], deadline_at: null, created_at: created, updated_at: created,
  };
  out.push(ev('MonitorCreated', { monitor }));
  const endpoint = {
    id: 'ep_copy', org_id: ORG, slug: 'in-copy', name: 'hooks', forward_urls: ['https://app.example.com/hooks'], retry_attempts: 5, use_lane: false, enabled: true,
    forward_method: null, forward_headers: null, forward_body: null, on_failure_url: null, on_recovery_url: null, notify_on_failure: null, notify_on_recovery: null,
    script: null, paused: false, secret_names: [], sealed_secrets: null, created_at: created, updated_at: created,
  };
  out.push(ev('EndpointCreated', { endpoint }));
  const inbound = (i: number) => {
    const exe = { execution_id: `exe_copy_in_${i}`, url: endpoint.forward_urls[0]!, method: null, headers: null, body: null, scheduled_for: at() };
    return [
      ev('InboundEventReceived', {
        event: { id: `evt_copy_in_${i}`, endpoint_id: endpoint.id, method: 'POST', path: '/', query: AWKWARD, source_ip: '10.0.0.1', received_at: at(), body_size: 10, inbound_seq: i + 1, outcome: 'forwarding' },
        endpoint: { id: endpoint.id, name: endpoint.name, use_lane: false, retry_attempts: 5 }, executions: [exe],
      }),
      finished(exe.execution_id, { type: 'endpoint', id: endpoint.id, name: endpoint.name }, 1, true, null),
    ];
  };
  for (let i = 0; i < 24; i++) {
    const t = task(i);
    const source = { type: 'task', id: t.id, name: t.name };
    const create = ev('TaskCreated', { task: t, execution: t.pending_execution });
    const results = i % 3 === 0
      ? [finished(t.pending_execution.id, source, 1, false, at()), ev('AttemptStarted', { execution_id: t.pending_execution.id, attempt: 2, started_at: at(), source }), finished(t.pending_execution.id, source, 2, true, null)]
      : [finished(t.pending_execution.id, source, 1, i % 7 !== 0, null)];
    // Every other task as a commit of its create and results (the owners' way); the others one event per message.
    if (i % 2) out.push(commitMessage(`cmt_copy_${i}`, [create, ...results]));
    else out.push(create, ...results);
    if (i % 6 === 1) out.push(ev('TaskUpdated', { task: { ...t, name: `renamed ${AWKWARD}`, updated_at: at() }, changed: ['name'] }));
    if (i % 8 === 5) {
      const again = { id: `exe_copy_${i}_again`, scheduled_for: at(), callback_url: null };
      out.push(ev('TaskTriggered', { task: { ...t, pending_execution: again, updated_at: at() }, execution: again }), finished(again.id, source, 1, true, null));
    }
    if (i % 9 === 4) out.push(ev('TaskDeleted', { task: t }));
    const ping = { id: `png_copy_${i}`, received_at: at(), kind: 'success', exit_status: null, rid: null, duration_ms: null, method: 'POST', source_ip: '10.1.2.3', user_agent: AWKWARD, body: AWKWARD };
    out.push(ev('MonitorPinged', { monitor: { ...monitor, status: 'up', last_ping_at: ping.received_at, updated_at: ping.received_at }, ping, previous_status: i ? 'up' : 'new' }));
    if (i % 4 === 2) out.push(...inbound(i));
  }
  out.push(ev('EndpointDeleted', { endpoint }));
  // A delivery recorded just after its endpoint's deletion leaves no row.
  out.push(...inbound(99));
  return out;
}

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

async function append(messages: (JetcronEvent | ReturnType<typeof commitMessage>)[]): Promise<number> {
  let last = 0;
  for (const m of messages) {
    const subject = m.type === 'Commit' ? SUBJECTS.task(ORG, m.id) : `evt.${ORG}.copytest.${m.id}`;
    last = await nats.publish(subject, encodeJson(m), { msgId: m.id });
  }
  return last;
}

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
