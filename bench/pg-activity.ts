/**
 * What Postgres did over a phase, per job: transactions committed in the database,
 * rows inserted / updated (of them HOT) / deleted per table, index pages touched per
 * index, and WAL records, full-page images and bytes (cluster-wide). Taken as a
 * snapshot before and after; the difference divided by the jobs. It says which
 * statements the projector's writes turn into inside Postgres, which its CPU per job
 * follows.
 *
 * Backends report their counters when idle, at most once a second and otherwise
 * within 10 s: a snapshot taken right after busy work misses up to that much, so
 * `settle` waits for it (pg_stat_force_next_flush covers only the calling backend).
 */
import type pg from 'pg';

type Query = Pick<pg.Pool, 'query'>;

export interface PgActivity {
  xacts: number;
  tables: Map<string, { ins: number; upd: number; hot: number; del: number }>;
  indexes: Map<string, number>;
  wal: { records: number; fpi: number; bytes: number };
}

export async function pgActivity(db: Query): Promise<PgActivity> {
  const [x, t, i, w] = await Promise.all([
    db.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()'),
    db.query<{ name: string; ins: string; upd: string; hot: string; del: string }>(
      'SELECT relname AS name, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del FROM pg_stat_user_tables'),
    db.query<{ name: string; blks: string }>('SELECT indexrelname AS name, idx_blks_hit + idx_blks_read AS blks FROM pg_statio_user_indexes'),
    db.query<{ records: string; fpi: string; bytes: string }>('SELECT wal_records AS records, wal_fpi AS fpi, wal_bytes AS bytes FROM pg_stat_wal'),
  ]);
  return {
    xacts: Number(x.rows[0]?.n ?? 0),
    tables: new Map(t.rows.map((r) => [r.name, { ins: Number(r.ins), upd: Number(r.upd), hot: Number(r.hot), del: Number(r.del) }])),
    indexes: new Map(i.rows.map((r) => [r.name, Number(r.blks)])),
    wal: { records: Number(w.rows[0]!.records), fpi: Number(w.rows[0]!.fpi), bytes: Number(w.rows[0]!.bytes) },
  };
}

/** Waits until every backend has reported what it did (see above). */
export async function settle(db: Query): Promise<void> {
  await db.query('SELECT pg_stat_force_next_flush()');
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  await db.query('SELECT pg_stat_clear_snapshot()');
}

/** The phase's activity per job, as lines of text (tables and indexes that did something). */
export function activityPerJob(before: PgActivity, after: PgActivity, jobs: number): string[] {
  const per = (n: number) => (n / jobs).toFixed(3);
  const lines = [`transactions ${per(after.xacts - before.xacts)}; WAL ${per(after.wal.records - before.wal.records)} records, ${per(after.wal.fpi - before.wal.fpi)} full pages, ${(
    (after.wal.bytes - before.wal.bytes) / jobs).toFixed(0)} bytes`];
  for (const [name, a] of after.tables) {
    const b = before.tables.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
    const d = { ins: a.ins - b.ins, upd: a.upd - b.upd, hot: a.hot - b.hot, del: a.del - b.del };
    if (d.ins || d.upd || d.del) lines.push(`${name}: inserted ${per(d.ins)}, updated ${per(d.upd)} (HOT ${per(d.hot)}), deleted ${per(d.del)}`);
  }
  const touched = [...after.indexes].map(([name, n]) => [name, n - (before.indexes.get(name) ?? 0)] as const).filter(([, n]) => n > 0);
  if (touched.length) lines.push(`index pages touched: ${touched.map(([name, n]) => `${name} ${per(n)}`).join(', ')}`);
  return lines;
}

/**
 * With `BENCH_PG_STATS=1`: the activity of a benchmark's measured phase, printed per job
 * (it waits for the counters after the phase, so it is off by default).
 */
export async function phaseActivity(db: Query, name: string): Promise<(jobs: number) => Promise<void>> {
  if (!process.env.BENCH_PG_STATS) return async () => {};
  const before = await pgActivity(db);
  return async (jobs) => {
    await settle(db);
    const lines = activityPerJob(before, await pgActivity(db), jobs);
    console.log(`${name}: Postgres per job over the phase\n${lines.map((l) => `  ${l}`).join('\n')}`);
  };
}
