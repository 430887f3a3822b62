/**
 * What Postgres spent per statement in a phase of a benchmark, from pg_stat_statements,
 * which must be preloaded (`PG_STATEMENTS_SETTINGS` at the server's start:
 * `BENCH_PG_STATEMENTS=1` asks it of the bench's shared Postgres, bench/harness.ts).
 * Blocks touched and WAL written by a statement are counts, not times: they tell one
 * design from another where a run's times move with the machine's other work.
 */
import type pg from 'pg';

/** The server settings that load pg_stat_statements (`startEmbeddedPostgres`'s `settings`). */
export const PG_STATEMENTS_SETTINGS = ['shared_preload_libraries=pg_stat_statements'];

/** BENCH_PG_STATEMENTS=1: the run asks for statement costs. */
export const pgStatementsAsked = () => process.env.BENCH_PG_STATEMENTS === '1';

export interface StatementCost {
  calls: number;
  ms: number;
  rows: number;
  /** Shared blocks hit or read. */
  blocks: number;
  /** Shared blocks dirtied. */
  dirtied: number;
  walBytes: number;
  query: string;
}

/** A phase's statement costs on the database `pool` reaches: `start` resets them, `read` gives the costliest. */
export async function openStatementCosts(pool: Pick<pg.Pool, 'query'>): Promise<{ start(): Promise<void>; read(top?: number): Promise<StatementCost[]> }> {
  await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  return {
    start: async () => void (await pool.query('SELECT pg_stat_statements_reset()')),
    async read(top = 8) {
      const { rows } = await pool.query<{ calls: string; ms: number; rows: string; blocks: string; dirtied: string; wal: string; q: string }>(`
        SELECT calls, total_exec_time AS ms, rows, shared_blks_hit + shared_blks_read AS blocks, shared_blks_dirtied AS dirtied,
          wal_bytes AS wal, regexp_replace(query, '\\s+', ' ', 'g') AS q
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT LIKE '%pg_stat_statements%'
        ORDER BY total_exec_time DESC LIMIT $1`, [top]);
      return rows.map((r) => ({
        calls: Number(r.calls), ms: Number(r.ms), rows: Number(r.rows), blocks: Number(r.blocks), dirtied: Number(r.dirtied), walBytes: Number(r.wal), query: r.q,
      }));
    },
  };
}

/** The statements of a phase per item (`count` of them): time, blocks and WAL, each statement a line's part. */
export function perItem(costs: StatementCost[], count: number): string {
  return costs.map((c) => `${c.query.slice(0, 70).trim()}… ${(c.ms * 1000 / count).toFixed(1)} µs, ${(c.blocks / count).toFixed(1)} blocks, ${(c.walBytes / count / 1024).toFixed(2)} KiB WAL`).join('; ');
}
