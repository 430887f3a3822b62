/**
 * Aim 7 of issue 21 on its own: `GET /api/v1/executions?limit=100` at concurrency 16
 * against 10,000 execution rows written straight into the read model (the dispatch
 * benchmark measures the same after its run, with a projector that has just finished).
 * Requests/s, latency and the CPU each list costs the service and Postgres.
 */
import { sleep } from './harness.ts';
import { listExecutions } from './dispatch-throughput.ts';
import { withStack, type Benchmark } from './stack.ts';
import { fmt } from './stats.ts';

const ROWS = 10_000;
const READ_MS = 8_000;

export const executionsList: Benchmark = {
  name: 'executions-list',
  title: `GET /executions?limit=100 at concurrency 16 over ${fmt.int(ROWS)} executions (aim: ≥ 1,000/s, p99 ≤ 30 ms)`,
  async run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      // Rows shaped like a finished task's execution: every list column filled.
      await s.db.query(
        `INSERT INTO executions (id, org_id, source_type, source_id, source_name, url, status, status_code, error_message, attempt,
           duration_ms, scheduled_for, started_at, finished_at, request, created_at, updated_at)
         SELECT 'exe_bench' || lpad(i::text, 8, '0'), $1, 'task', 'tsk_bench' || (i % 500), 'task ' || (i % 500),
           'https://example.com/hooks/' || i, CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'success' END,
           CASE WHEN i % 10 = 0 THEN 500 ELSE 200 END, CASE WHEN i % 10 = 0 THEN 'HTTP 500' END, 1, 20 + i % 50,
           now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval + interval '20 ms',
           '{}'::json, now() - (i || ' seconds')::interval, now() - (i || ' seconds')::interval
         FROM generate_series(1, ${ROWS}) AS i`,
        [s.orgId],
      );
      await s.db.query('ANALYZE executions');
      await sleep(200);
      const cpuEnd = s.startCpuPhase();
      const reads = await listExecutions(s, READ_MS);
      const cpu = cpuEnd();
      const count = Math.round(reads.rate * (READ_MS / 1000));
      const ms = (name: string) => ((cpu.rows.find((r) => r.name.startsWith(name))?.cpuSeconds ?? 0) * 1000) / Math.max(1, count);
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'requests/s', value: fmt.rate(reads.rate), goal: '≥ 1,000/s', ok: reads.rate >= 1000 },
          { label: 'p50 / p99 / max', value: `${fmt.ms(reads.lat.p50)} / ${fmt.ms(reads.lat.p99)} / ${fmt.ms(reads.lat.max)}`, goal: 'p99 ≤ 30 ms', ok: reads.lat.p99 <= 30 },
          { label: 'outcomes', value: reads.outcomes },
          { label: 'CPU per list: service / Postgres / load generator', value: `${fmt.ms(ms('jetcron'))} / ${fmt.ms(ms('postgres'))} / ${fmt.ms(ms('bench'))}` },
        ],
        headline: [{ label: 'GET /executions?limit=100 c16: requests/s, p99', value: `${fmt.rate(reads.rate)}, ${fmt.ms(reads.lat.p99)}`, goal: '≥ 1,000/s, p99 ≤ 30 ms', ok: reads.rate >= 1000 && reads.lat.p99 <= 30 }],
        tables: [],
        cpu: { phase: `${READ_MS / 1000} s of lists`, report: cpu, units: { count, what: 'list' } },
        notes: [`${fmt.int(ROWS)} rows inserted with SQL before the run; the projector is idle during it`],
      };
    });
  },
};
