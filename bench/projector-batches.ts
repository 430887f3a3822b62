/**
 * What Postgres spends per job on the projector's writes, by transaction size: the
 * events of 10,000 lane-free jobs (each a create, then its result, in the shapes the
 * service writes: `bench/fixtures/`) applied as the live projector does (a batch's
 * rows merged in memory, its statements and the checkpoint in one transaction), in
 * transactions of N jobs' events, the results of a batch's jobs landing in the next
 * batch (a result arrives after its create) or in the same one (they landed together).
 * Postgres's backend CPU comes from /proc, the sizes interleaved over rounds, so a
 * busy machine moves all of them alike.
 *
 *   node bench/projector-batches.ts [rounds]   (starts its own Postgres in a temp dir)
 *   PB_SCHEMA=1 …    experiments on the tables
 *   PB_PROFILE=1 …   the live projector's shapes once each, with what Postgres did per job:
 *                    rows inserted / updated (HOT), index pages, WAL, and the statements
 *                    by time (pg_stat_statements, loaded at this Postgres's start)
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { applyEvent } from '../src/projections/apply-event.ts';
import { ProjectionBatch } from '../src/projections/batch.ts';
import { startEmbeddedPostgres } from '../src/runtime/embedded-postgres.ts';
import { activityPerJob, pgActivity } from './pg-activity.ts';
import { openStatementCosts, PG_STATEMENTS_SETTINGS, type StatementCost } from './pg-statements.ts';

const JOBS = 10_000;
const fixture = JSON.parse(readFileSync(new URL('./fixtures/lane-job-events.json', import.meta.url), 'utf8')) as { created: TaskEvent; finished: ExecutionEvent };

function jobs(round: string): Array<{ create: JetcronEvent; result: JetcronEvent }> {
  const c = fixture.created.data as unknown as { task: { id: string; lane: string }; execution: { id: string } };
  const createText = JSON.stringify(fixture.created).replaceAll(`"lane":"${c.task.lane}"`, '"lane":null');
  const resultText = JSON.stringify(fixture.finished).replaceAll(`"lane":"${c.task.lane}"`, '"lane":null');
  return Array.from({ length: JOBS }, (_, i) => {
    const taskId = `${c.task.id.slice(0, -8)}${round}${String(i).padStart(6, '0')}`;
    const execId = `${c.execution.id.slice(0, -8)}${round}${String(i).padStart(6, '0')}`;
    const swap = (t: string) => t.replaceAll(c.task.id, taskId).replaceAll(c.execution.id, execId);
    return { create: JSON.parse(swap(createText)) as JetcronEvent, result: JSON.parse(swap(resultText)) as JetcronEvent };
  });
}

async function backendCpuMs(db: Db): Promise<number> {
  const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db);
  const stat = readFileSync(`/proc/${rows[0]!.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(stat[11]) + Number(stat[12])) * 1000) / 100;
}

async function commit(db: Db, events: JetcronEvent[], seq: number, copy: boolean): Promise<void> {
  const batch = new ProjectionBatch();
  for (const e of events) applyEvent(batch, e);
  const statements = batch.statements({ copyCreated: copy });
  await db.transaction().execute(async (trx) => {
    await sql`SELECT set_config('synchronous_commit', 'off', true), (SELECT seq FROM projection_checkpoints WHERE name = 'bench') AS seq`.execute(trx);
    for (const s of statements) await s.execute(trx);
    await sql`INSERT INTO projection_checkpoints (name, seq) VALUES ('bench', ${seq}) ON CONFLICT (name) DO UPDATE SET seq = GREATEST(projection_checkpoints.seq, EXCLUDED.seq)`.execute(trx);
  });
}

/** Transactions of `size` jobs: creates of batch k with the results of batch k−1 (`together`: with their own). */
async function run(db: Db, size: number, together: boolean, round: string, copy = false): Promise<{ cpuMs: number; transactions: number }> {
  const all = jobs(round);
  const before = await backendCpuMs(db);
  let transactions = 0;
  let seq = 0;
  for (let i = 0; i <= all.length; i += size) {
    const slice = all.slice(i, i + size);
    const prev = together ? [] : all.slice(Math.max(0, i - size), i);
    const events = [...slice.map((j) => j.create), ...(together ? slice.map((j) => j.result) : prev.map((j) => j.result))];
    if (!events.length) continue;
    await commit(db, events, ++seq, copy);
    transactions++;
  }
  return { cpuMs: (await backendCpuMs(db)) - before, transactions };
}

/** The statements of the phase by time, per job (each statement's time is its backend's, alone here). */
function statementsPerJob(costs: StatementCost[]): string[] {
  return costs.map((r) => `${((r.ms * 1000) / JOBS).toFixed(1).padStart(6)} µs, ${(r.calls / JOBS).toFixed(3)} calls, ${(r.rows / JOBS).toFixed(2)} rows, ${((r.blocks + r.dirtied) / JOBS).toFixed(1)} blocks, ${(r.walBytes / JOBS).toFixed(0)} WAL bytes: ${r.query.slice(0, 150)}`);
}

/** Each live shape once, with what Postgres did per job. */
async function profile(db: Db, pool: import('pg').Pool, variants: Array<{ size: number; together: boolean; copy?: boolean; setup?: string; undo?: string; label?: string }>): Promise<void> {
  const statements = await openStatementCosts(pool);
  for (const v of variants) {
    if (v.setup) await sql.raw(v.setup).execute(db);
    await statements.start();
    const before = await pgActivity(pool);
    const out = await run(db, v.size, v.together, `p${variants.indexOf(v)}`, v.copy);
    await sql`SELECT pg_stat_force_next_flush()`.execute(db);
    await sql`SELECT pg_stat_clear_snapshot()`.execute(db);
    const after = await pgActivity(pool);
    console.log(`\n${v.size} jobs a transaction, ${v.together ? 'create and result together' : 'results one transaction later'}${v.copy ? ', new rows by COPY' : ''}${v.label ? `, ${v.label}` : ''}: backend CPU ${((out.cpuMs * 1000) / JOBS).toFixed(1)} µs per job`);
    for (const line of activityPerJob(before, after, JOBS)) console.log(`  ${line}`);
    const size = await sql<{ heap: string; idx: string }>`SELECT pg_relation_size('executions') AS heap, pg_indexes_size('executions') AS idx`.execute(db);
    console.log(`  executions: heap ${(Number(size.rows[0]!.heap) / JOBS).toFixed(0)} bytes per job, indexes ${(Number(size.rows[0]!.idx) / JOBS).toFixed(0)}`);
    for (const line of statementsPerJob(await statements.read(12))) console.log(`  ${line}`);
    if (v.undo) await sql.raw(v.undo).execute(db);
    await sql`TRUNCATE tasks, executions, execution_attempts`.execute(db);
  }
}

const rounds = Number(process.argv[2] ?? 3);
const dir = await mkdtemp(path.join(tmpdir(), 'jetcron-pb-'));
const pg = await startEmbeddedPostgres({ dataDir: dir, settings: process.env.PB_PROFILE ? PG_STATEMENTS_SETTINGS : [] });
try {
  const { db, pool } = connectDb(pg.url, 1);
  await migrate(db);
  if (process.env.PB_PROFILE) {
    const ff = (n: number, together = false) => ({ size: 100, together, copy: true, label: `executions fillfactor ${n}`, setup: `ALTER TABLE executions SET (fillfactor = ${n})`, undo: 'ALTER TABLE executions RESET (fillfactor)' });
    await profile(db, pool, process.env.PB_PROFILE === 'fillfactor' ? [ff(100), ff(50), ff(30), ff(20), ff(100, true), ff(20, true)] : [
      { size: 20, together: false, copy: true }, { size: 100, together: false, copy: true }, { size: 100, together: true, copy: true },
    ]);
  } else await compare(db, rounds);
  await db.destroy();
  await pool.end().catch(() => {});
} finally {
  await pg.stop();
  await rm(dir, { recursive: true, force: true });
}

/** Postgres's CPU per job of each variant, interleaved over rounds. */
async function compare(db: Db, rounds: number): Promise<void> {
  type Variant = { size: number; together: boolean; label?: string; setup?: string; undo?: string; copy?: boolean };
  const sizes: Variant[] = [
    { size: 5, together: false }, { size: 20, together: false }, { size: 100, together: false }, { size: 500, together: false },
    { size: 20, together: true }, { size: 100, together: true },
    // The live projector's way now: new rows by COPY.
    { size: 20, together: false, label: 'new rows by COPY', copy: true }, { size: 100, together: false, label: 'new rows by COPY', copy: true },
    { size: 500, together: false, label: 'new rows by COPY', copy: true }, { size: 100, together: true, label: 'new rows by COPY', copy: true },
  ];
  // Experiments on the tables (`PB_SCHEMA=1`): each set up on the empty tables and undone after.
  const schema: Variant[] = [
    { size: 100, together: false, label: 'as is' },
    { size: 100, together: false, label: 'executions fillfactor 50', setup: 'ALTER TABLE executions SET (fillfactor = 50)', undo: 'ALTER TABLE executions RESET (fillfactor)' },
    { size: 100, together: false, label: 'ids COLLATE "C"', setup: 'ALTER TABLE executions ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN org_id TYPE text COLLATE "C", ALTER COLUMN source_id TYPE text COLLATE "C"; ALTER TABLE tasks ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN org_id TYPE text COLLATE "C"', undo: 'ALTER TABLE executions ALTER COLUMN id TYPE text COLLATE "default", ALTER COLUMN org_id TYPE text COLLATE "default", ALTER COLUMN source_id TYPE text COLLATE "default"; ALTER TABLE tasks ALTER COLUMN id TYPE text COLLATE "default", ALTER COLUMN org_id TYPE text COLLATE "default"' },
    { size: 100, together: false, label: 'new rows by COPY', copy: true },
  ];
  const variants = process.env.PB_SCHEMA ? schema : sizes;
  const results = new Map<string, number[]>();
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) {
      if (v.setup) await sql.raw(v.setup).execute(db);
      const out = await run(db, v.size, v.together, `${r}${variants.indexOf(v)}`.padStart(8, 'x').slice(-2), v.copy);
      if (v.undo) await sql.raw(v.undo).execute(db);
      const name = `${String(v.size).padStart(4)} jobs a transaction, ${v.together ? 'create and result together' : 'results one transaction later'}${v.label ? `, ${v.label}` : ''} (${out.transactions} transactions)`;
      (results.get(name) ?? results.set(name, []).get(name)!).push((out.cpuMs * 1000) / JOBS);
      await sql`TRUNCATE tasks, executions, execution_attempts`.execute(db);
    }
  }
  console.log(`Postgres backend CPU per job (µs), median of ${rounds} rounds [all rounds]`);
  for (const [name, xs] of results) {
    const m = [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    console.log(`${m.toFixed(1).padStart(7)}  ${name}  [${xs.map((x) => x.toFixed(0)).join(' ')}]`);
  }
}
