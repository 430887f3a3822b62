// Projector specs: given these events, landing in these batches, then these rows. No
// service, no NATS, no waiting: the batches are applied as the projector applies them
// (applyEvent into a ProjectionBatch, its statements in one transaction) to a real
// Postgres with the read models' migrations.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { callbackAttempted, decideAttemptResult } from '../src/commands/execution/decide.ts';
import { executionCancelled } from '../src/commands/execution/ending.ts';
import type { OutboundResult } from '../src/commands/execution/exchange.ts';
import { taskAttemptJob } from '../src/commands/execution/task-jobs.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { AttemptOutcome } from '../src/commands/execution/outcome.ts';
import { decideMonitor, evolveMonitor } from '../src/commands/monitor/decide.ts';
import type { MonitorEvent } from '../src/commands/monitor/types.ts';
import { decideTask, evolveTask } from '../src/commands/task/decide.ts';
import { decideGroupTrigger } from '../src/commands/execution/retry.ts';
import type { Task, TaskEvent } from '../src/commands/task/types.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { applyEvent } from '../src/projections/apply-event.ts';
import { attemptsOf } from '../src/projections/attempt-rows.ts';
import { ProjectionBatch } from '../src/projections/batch.ts';
import { meta, NOW_MS } from './deciders/spec.ts';
import { createTestDatabase } from './support/postgres.ts';

const ORG = 'org_spec';

/** Applies each batch as the projector does: one batch, one transaction. */
async function project(db: Db, ...batches: JetcronEvent[][]): Promise<void> {
  for (const events of batches) {
    const batch = new ProjectionBatch();
    for (const e of events) applyEvent(batch, e);
    await db.transaction().execute((trx) => batch.flush(trx));
  }
}

/** A task created now, its create event and its first execution's attempt job. */
function createdTask(name: string, input: Record<string, unknown> = {}) {
  const created = decideTask({ type: 'CreateTask', orgId: ORG, plan: 'pro', input: { url: `https://example.com/${name}`, name, retry_attempts: 2, ...input } }, null, { ...meta(), newId: (p) => `${p}_${name}` })[0]! as TaskEvent;
  const task = evolveTask(null, created)! as Task;
  const execution = (created.data as { execution: { id: string; scheduled_for: string; callback_url: string | null } }).execution;
  return { created, task, execution, job: (attempt: number) => taskAttemptJob(task, execution, attempt) };
}

const ok: AttemptOutcome = { status: 'success', status_code: 200, error_message: null, retryable: false, retry_after_ms: null };
const failed: AttemptOutcome = { status: 'failed', status_code: 503, error_message: 'HTTP 503', retryable: true, retry_after_ms: null };

/** An attempt's result, decided by the execution aggregate as an owner decides it. */
function attempt(t: ReturnType<typeof createdTask>, n: number, outcome: AttemptOutcome, atMs: number): ExecutionEvent {
  const exchange = {
    started_at: new Date(atMs - 5).toISOString(), finished_at: new Date(atMs).toISOString(), duration_ms: 5,
    request: { method: 'POST', url: t.task.url, headers: {}, body: null }, response_body: 'ok', response_truncated: false, response_headers: {},
  };
  return decideAttemptResult({ job: t.job(n), uncounted: 0, outcome, signal: null, host: null, hostBlockEnd: 0, jitter: 0, exchange, nowMs: atMs, wait: (ms) => ms });
}

describe('projector specs: events in, rows out', () => {
  let db: Db;
  let pool: { end(): Promise<void> };
  let drop: () => Promise<void>;
  before(async () => {
    const created = await createTestDatabase();
    drop = created.drop;
    ({ db, pool } = connectDb(created.url));
    await migrate(db);
  });
  after(async () => {
    await db.destroy().catch(() => {});
    await pool.end().catch(() => {});
    await drop();
  });

  const execution = (id: string) => db.selectFrom('executions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  /** The attempts as the API reads them: the rows a retry left, then the last one the execution's row holds. */
  const attempts = async (id: string) => {
    const rows = await db.selectFrom('execution_attempts').selectAll().where('execution_id', '=', id).orderBy('attempt').execute();
    const exec = await db.selectFrom('executions').selectAll().where('id', '=', id).executeTakeFirst();
    return (exec ? attemptsOf(exec, rows) : rows).map((a) => ({ attempt: a.attempt, status: a.status, status_code: a.status_code }));
  };
  const attemptRows = async (id: string) => (await db.selectFrom('execution_attempts').select('attempt').where('execution_id', '=', id).execute()).length;

  test('a create and its result give the same row whether they land in one batch or two', async () => {
    const together = createdTask('together');
    const apart = createdTask('apart');
    await project(db, [together.created, attempt(together, 1, ok, NOW_MS + 10)]);
    await project(db, [apart.created], [attempt(apart, 1, ok, NOW_MS + 10)]);
    const [a, b] = [await execution(together.execution.id), await execution(apart.execution.id)];
    for (const row of [a, b]) {
      assert.equal(row.status, 'success');
      assert.equal(row.attempt, 1);
      assert.equal(row.status_code, 200);
    }
    const same = (r: typeof a) => ({ status: r.status, attempt: r.attempt, status_code: r.status_code, duration_ms: r.duration_ms, response_body: r.response_body, finished_at: r.finished_at });
    assert.deepEqual(same(a), same(b));
    assert.deepEqual(await attempts(together.execution.id), [{ attempt: 1, status: 'success', status_code: 200 }]);
    assert.deepEqual(await attempts(apart.execution.id), [{ attempt: 1, status: 'success', status_code: 200 }]);
  });

  test('a failed attempt with a retry to come leaves the execution pending at its retry time; the retry ends it', async () => {
    const t = createdTask('retried');
    const first = attempt(t, 1, failed, NOW_MS + 10);
    const retryAt = (first.data as { next_attempt_at: string | null }).next_attempt_at;
    assert.ok(retryAt, 'the decider planned a retry');
    await project(db, [t.created, first]);
    const waiting = await execution(t.execution.id);
    assert.equal(waiting.status, 'pending');
    assert.equal(new Date(waiting.scheduled_for as unknown as string).toISOString(), retryAt);
    await project(db, [attempt(t, 2, ok, Date.parse(retryAt) + 10)]);
    const done = await execution(t.execution.id);
    assert.equal(done.status, 'success');
    assert.equal(done.attempt, 2);
    assert.deepEqual(await attempts(t.execution.id), [{ attempt: 1, status: 'failed', status_code: 503 }, { attempt: 2, status: 'success', status_code: 200 }]);
    // Only the attempt a retry followed has a row of its own; the last one is the execution's row.
    assert.equal(await attemptRows(t.execution.id), 1);
  });

  test('a cancelled execution reads cancelled; a result read again changes nothing (a replay after a crash)', async () => {
    const t = createdTask('cancelled');
    const cancel = executionCancelled(ORG, { execution_id: t.execution.id, source: { type: 'task', id: t.task.id, name: t.task.name }, reason: 'task deleted', lane: null }, NOW_MS);
    await project(db, [t.created], [cancel]);
    assert.equal((await execution(t.execution.id)).status, 'cancelled');
    const r = createdTask('replayed');
    const result = attempt(r, 1, ok, NOW_MS + 10);
    await project(db, [r.created, result]);
    const once = await execution(r.execution.id);
    await project(db, [r.created, result]);
    assert.deepEqual(await execution(r.execution.id), once);
    assert.equal((await attempts(r.execution.id)).length, 1);
    assert.equal(await attemptRows(r.execution.id), 0);
  });

  test('a deleted task takes its executions and their attempts with it, also those created in the same batch', async () => {
    const t = createdTask('deleted');
    const deleted = decideTask({ type: 'DeleteTask' }, t.task, meta())[0]!;
    await project(db, [t.created, attempt(t, 1, ok, NOW_MS + 10), deleted]);
    assert.equal(await db.selectFrom('tasks').select('id').where('id', '=', t.task.id).executeTakeFirst(), undefined);
    assert.equal(await db.selectFrom('executions').select('id').where('id', '=', t.execution.id).executeTakeFirst(), undefined);
    assert.deepEqual(await attempts(t.execution.id), []);
  });

  // A bulk job's trigger is committed on the jobs subject, decided on the task's state
  // read earlier (`source_seq`): the live projector writes new rows by COPY, a careful
  // pass and the plain flush by upserts; both must give the same rows.
  for (const copyCreated of [false, true]) {
    test(`a bulk job's trigger: its run and the task's last_execution_id, never the task's definition; after the task's delete, no row (${copyCreated ? 'COPY' : 'upserts'})`, async () => {
      const write = async (...batches: JetcronEvent[][]) => {
        for (const events of batches) {
          const batch = new ProjectionBatch();
          for (const e of events) applyEvent(batch, e);
          await db.transaction().execute(async (trx) => {
            for (const statement of batch.statements({ copyCreated })) await statement.execute(trx);
          });
        }
      };
      const tag = copyCreated ? 'c' : 'u';
      const trigger = (t: ReturnType<typeof createdTask>, n: string) => decideGroupTrigger(
        { type: 'TriggerTask', taskId: t.task.id, retryOf: t.execution.id, callbackUrl: null }, { state: t.task, seq: 1 }, { eventId: `evt_${n}`, executionId: `exe_${n}` }, meta(),
      ) as JetcronEvent;
      const kept = createdTask(`kept${tag}`);
      const updated = decideTask({ type: 'UpdateTask', plan: 'pro', input: { name: 'newer' } }, kept.task, meta())[0]!;
      await write([kept.created, attempt(kept, 1, { ...failed, retryable: false }, NOW_MS + 10)], [updated], [trigger(kept, `run${tag}`)]);
      const task = await db.selectFrom('tasks').select(['doc', 'last_execution_id']).where('id', '=', kept.task.id).executeTakeFirstOrThrow();
      assert.deepEqual([(task.doc as { name: string }).name, task.last_execution_id], ['newer', `exe_run${tag}`]);
      assert.deepEqual([(await execution(`exe_run${tag}`)).status, (await execution(`exe_run${tag}`)).retry_of], ['pending', kept.execution.id]);
      assert.equal((await execution(kept.execution.id)).retried_by, `exe_run${tag}`);

      const gone = createdTask(`gone${tag}`);
      const deleted = decideTask({ type: 'DeleteTask' }, gone.task, meta())[0]!;
      await write([gone.created, deleted], [trigger(gone, `late${tag}`), executionCancelled(ORG, { execution_id: `exe_late${tag}`, source: { type: 'task', id: gone.task.id, name: gone.task.name }, reason: 'task deleted', lane: null }, NOW_MS + 20)]);
      assert.equal(await db.selectFrom('executions').select('id').where('id', '=', `exe_late${tag}`).executeTakeFirst(), undefined, 'no row for a run of a deleted task');
      assert.equal(await db.selectFrom('tasks').select('id').where('id', '=', gone.task.id).executeTakeFirst(), undefined, 'the task is not brought back');

      // One batch: a run of a task the batch writes (its row takes the run), one of a task
      // written before, one of a task deleted before; only the last has no row.
      const [mixedNew, mixedOld, mixedGone] = ['new', 'old', 'gone'].map((n) => createdTask(`mixed${n}${tag}`)) as [ReturnType<typeof createdTask>, ReturnType<typeof createdTask>, ReturnType<typeof createdTask>];
      await write([mixedOld.created, mixedGone.created, decideTask({ type: 'DeleteTask' }, mixedGone.task, meta())[0]!]);
      await write([mixedNew.created, trigger(mixedNew, `mn${tag}`), trigger(mixedOld, `mo${tag}`), trigger(mixedGone, `mg${tag}`)]);
      const runs = await db.selectFrom('executions').select('id').where('id', 'in', [`exe_mn${tag}`, `exe_mo${tag}`, `exe_mg${tag}`]).orderBy('id').execute();
      assert.deepEqual(runs.map((r) => r.id), [`exe_mn${tag}`, `exe_mo${tag}`]);
      const lasts = await db.selectFrom('tasks').select(['id', 'last_execution_id']).where('id', 'in', [mixedNew.task.id, mixedOld.task.id]).orderBy('id').execute();
      assert.deepEqual(new Set(lasts.map((r) => r.last_execution_id)), new Set([`exe_mn${tag}`, `exe_mo${tag}`]));
    });
  }

  test('a callback try is kept in the log only: no row changes', async () => {
    const t = createdTask('callback');
    await project(db, [t.created, attempt(t, 1, ok, NOW_MS + 10)]);
    const before = await execution(t.execution.id);
    const answer = { kind: 'response', statusCode: 500 } as OutboundResult;
    const tried = callbackAttempted({ kind: 'callback', org_id: ORG, execution_id: t.execution.id, source: { type: 'task', id: t.task.id, name: t.task.name }, url: 'https://example.com/cb', body: '{}', attempt: 1 }, answer, NOW_MS, (ms) => ms);
    await project(db, [tried]);
    assert.deepEqual(await execution(t.execution.id), before);
  });

  test('a monitor\'s restatement (an owner\'s anchor) changes no row and adds no ping, in the ping\'s batch or after it', async () => {
    const rows = async (id: string) => ({
      monitor: await db.selectFrom('monitors').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
      pings: await db.selectFrom('pings').selectAll().where('monitor_id', '=', id).execute(),
    });
    for (const name of ['apart', 'together']) {
      const created = decideMonitor({ type: 'CreateMonitor', orgId: ORG, input: { name, schedule_type: 'interval', interval_seconds: 60 } }, null, { ...meta(), newId: (p) => `${p}_${name}` })[0]!;
      const pinged = decideMonitor({ type: 'Ping', ping: { id: `png_${name}`, received_at: new Date(NOW_MS + 1000).toISOString(), suffix: null, rid: null, method: 'GET', source_ip: null, user_agent: null, body: '' } }, evolveMonitor(null, created), { ...meta(new Date(NOW_MS + 1000).toISOString()), eventId: `evt_${name}` })[0]!;
      const restated: MonitorEvent = { type: 'MonitorRestated', id: `x.restated.${name}`, at: new Date(NOW_MS + 9000).toISOString(), org_id: ORG, data: { monitor: pinged.data.monitor, restated_seq: 2 } };
      const id = pinged.data.monitor.id;
      await project(db, [created], [pinged]);
      const before = await rows(id);
      assert.equal(before.pings.length, 1);
      if (name === 'apart') await project(db, [restated]);
      else await project(db, [pinged, restated]);
      assert.deepEqual(await rows(id), before);
    }
  });
});
