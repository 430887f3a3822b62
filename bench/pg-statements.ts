/**
 * What Postgres spent per statement in a phase of a benchmark, from pg_stat_statements
 * (`BENCH_PG_STATEMENTS=1` preloads it in the bench's Postgres: bench/harness.ts). Blocks
 * touched and WAL written by a statement are counts, not times: they tell one design from
 * another where a run's times move with the machine's other work.
 */
import type pg from 'pg';

export interface StatementCost {
  calls: number;
  ms: number;
  rows: number;
  /** Shared blocks hit or read. */
  blocks: number;
  walBytes: number;
  query: string;
}

/** Statement costs over phases, or null when pg_stat_statements was not asked for. */
export async function pgStatements(db: pg.Pool): Promise<{ start(): Promise<void>; read(top?: number): Promise<StatementCost[]> } | null> {
  if (process.env.BENCH_PG_STATEMENTS !== '1') return null;
  await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  return {
    start: async () => void (await db.query('SELECT pg_stat_statements_reset()')),
    async read(top = 8) {
      const { rows } = await db.query<{ calls: string; ms: number; rows: string; blocks: string; wal: string; q: string }>(`
        SELECT calls, total_exec_time AS ms, rows, shared_blks_hit + shared_blks_read AS blocks, wal_bytes AS wal,
          left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT LIKE '%pg_stat_statements%'
        ORDER BY total_exec_time DESC LIMIT $1`, [top]);
      return rows.map((r) => ({ calls: Number(r.calls), ms: Number(r.ms), rows: Number(r.rows), blocks: Number(r.blocks), walBytes: Number(r.wal), query: r.q }));
    },
  };
}

/** The statements of a phase per item (`count` of them): time, blocks and WAL, each statement a line's part. */
export function perItem(costs: StatementCost[], count: number): string {
  return costs.map((c) => `${c.query.trim()}… ${(c.ms * 1000 / count).toFixed(1)} µs, ${(c.blocks / count).toFixed(1)} blocks, ${(c.walBytes / count / 1024).toFixed(2)} KiB WAL`).join('; ');
}
