/**
 * The plan and time of the executions list's page (limit 100) and of a dry-run count
 * for each filter beside `dead=true` (the aim), and alone, over FP_ROWS executions (default 1,000,000) of one organization,
 * with the migrations' indexes (issue 36, "Speed"; docs/architecture.md, "Failure
 * recovery" quotes a run). Run: `node bench/filter-plans.ts` (an embedded Postgres of
 * its own, dropped at the end).
 */
import { sql } from 'kysely';
import { connectDb } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import { countSql, pageConditions, parseExecutionFilter, type FilterName } from '../src/http/execution-filter.ts';
import { createTestDatabase } from '../test/support/postgres.ts';

const ROWS = Number(process.env.FP_ROWS ?? 1_000_000);
const ORG = 'org_plans';
const database = await createTestDatabase();
const { db } = connectDb(database.url, 2);
try {
  await migrate(db);
  // 1 in 10 failed (half 500, half 404), 1 in 50 of those retried; 1 in 5 a schedule tick, 1 in 10 an
  // endpoint delivery; 200 hosts; 500 tasks of which 50 in lanes; another organization as large.
  for (const org of [ORG, 'org_other']) {
    await sql`INSERT INTO executions (id, org_id, source_type, source_id, source_name, url, status, status_code, error_message, attempt,
        duration_ms, scheduled_for, started_at, finished_at, retried_by, created_at, updated_at)
      SELECT ${org} || '_exe' || lpad(i::text, 8, '0'), ${org},
        CASE WHEN i % 5 = 1 THEN 'schedule' WHEN i % 10 = 2 THEN 'endpoint' ELSE 'task' END,
        CASE WHEN i % 5 = 1 THEN 'sch_' || ${org} || (i % 40) WHEN i % 10 = 2 THEN 'ep_' || ${org} || (i % 30) ELSE ${org} || '_tsk' || (i % 500) END,
        'source', 'https://h' || (i % 200) || '.example.com/hooks/' || i,
        CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'success' END,
        CASE WHEN i % 20 = 0 THEN 500 WHEN i % 10 = 0 THEN 404 ELSE 200 END,
        CASE WHEN i % 20 = 0 THEN 'HTTP 500 from upstream' WHEN i % 10 = 0 THEN 'HTTP 404' END, 1, 20,
        now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval + interval '20 ms',
        CASE WHEN i % 500 = 0 THEN 'exe_retry' || i END,
        now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval
      FROM generate_series(1, ${ROWS}) AS i`.execute(db);
    await sql`INSERT INTO tasks (id, org_id, doc, lane, created_at, updated_at)
      SELECT ${org} || '_tsk' || i, ${org}, '{}'::json, CASE WHEN i < 50 THEN 'lane' || (i % 5) END, now(), now()
      FROM generate_series(0, 499) AS i`.execute(db);
  }
  await sql`VACUUM ANALYZE executions`.execute(db);
  await sql`VACUUM ANALYZE tasks`.execute(db);
  const cases: [string, Partial<Record<FilterName, string>>][] = [
    ['dead', { dead: 'true' }],
    ['source_type', { source_type: 'endpoint' }],
    ['task_id', { task_id: `${ORG}_tsk7` }],
    ['schedule_id', { schedule_id: `sch_${ORG}11` }],
    ['endpoint_id', { endpoint_id: `ep_${ORG}2` }],
    ['lane', { lane: 'lane3' }],
    ['host', { host: 'h17.example.com' }],
    ['status_code', { status_code: '404' }],
    ['status_code 5xx', { status_code: '5xx' }],
    ['error', { error: 'upstream' }],
    ['finished_after', { finished_after: '2h' }],
    ['finished_before', { finished_before: '200h' }],
  ];
  // The aim's shape first (each filter beside `dead=true`, the bulk calls' default), then each alone.
  const shapes = [...cases.slice(1).map(([name, values]) => [`dead + ${name}`, { ...values, dead: 'true' }] as const), ...cases];
  for (const [name, values] of shapes) {
    const { filter } = parseExecutionFilter((n) => values[n], Date.now());
    // The service's own query shapes (GET /executions' page, the bulk calls' count).
    const where = sql.join(pageConditions(ORG, filter, 101), sql` AND `);
    const page = sql`SELECT id FROM executions WHERE ${where} ORDER BY executions.scheduled_for DESC, executions.id DESC LIMIT 101`;
    const count = countSql(ORG, filter);
    for (const [what, query] of [['page', page], ['count', count]] as const) {
      const times: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t = performance.now();
        await query.execute(db);
        times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      const plan = await sql<{ 'QUERY PLAN': string }>`EXPLAIN (COSTS OFF) ${query}`.execute(db);
      process.stdout.write(`\n### ${name} (${what}): median ${times[10]!.toFixed(1)} ms, max ${times[19]!.toFixed(1)} ms of 20\n`);
      process.stdout.write(`${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
    }
  }
} finally {
  await db.destroy();
  await database.drop();
}
process.exit(0);
