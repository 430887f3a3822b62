/**
 * The batch create API: 20 × POST /api/v1/tasks/batch of 1,000 tasks each, one
 * after another, `run_at` 24 h ahead so nothing runs: only the accept path
 * (validate, store the batch, append each task, wait for the projection).
 */
import { troubleNotes, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize } from './stats.ts';

const BATCHES = 20;
const PER_BATCH = 1000;
const WARMUP_BATCHES = 2;

export const batchAccept: Benchmark = {
  name: 'batch-accept',
  title: `${BATCHES} × POST /api/v1/tasks/batch of ${PER_BATCH.toLocaleString('en-US')} tasks, sequential, run_at 24 h ahead`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const runAt = new Date(Date.now() + 86_400_000).toISOString();
      const client = s.client(1);
      const body = (lane: string, tag: string) =>
        JSON.stringify({
          lane,
          run_at: runAt,
          tasks: Array.from({ length: PER_BATCH }, (_, i) => ({ url: `${s.target.url}/hit?id=${tag}-${i}`, name: `${tag}-${i}` })),
        });
      const post = (b: string) => client.send('POST', '/api/v1/tasks/batch', { body: b });

      const warm: string[] = [];
      for (let n = 0; n < WARMUP_BATCHES; n++) warm.push(String((await post(body(`accept-warm-${n}`, `bw${n}`))).status));

      const bodies = Array.from({ length: BATCHES }, (_, n) => body(`accept-${n}`, `ba${n}`));
      const bytes = Buffer.byteLength(bodies[0]!);
      const ms: number[] = [];
      const perBatch: { status: number; ms: number; created: number }[] = [];
      const failures: string[] = [];
      const cpuEnd = s.startCpuPhase();
      const t0 = performance.now();
      for (let n = 0; n < BATCHES; n++) {
        const r = await post(bodies[n]!);
        let created = 0;
        if (r.status === 201) {
          created = (JSON.parse(r.text) as { data?: { created?: number } }).data?.created ?? 0;
          ms.push(r.ms);
        } else if (failures.length < 5) {
          failures.push(`batch ${n}: ${r.status} ${r.text.slice(0, 300)}`);
        }
        perBatch.push({ status: r.status, ms: r.ms, created });
      }
      const elapsed = (performance.now() - t0) / 1000;
      const cpu = cpuEnd();

      const accepted = perBatch.reduce((a, b) => a + b.created, 0);
      const lat = summarize(ms);
      const rate = accepted / elapsed;
      // A write's answer does not wait for the read models (a later read of the organization
      // does): how long after the last answer Postgres holds every task, up to 30 s.
      const countStored = () => s.db.query<{ n: string; lanes: string; pending: string }>(
        // A task's status is its last execution's (tasks.status is no longer written, migration 0007).
        `SELECT count(*) AS n, count(DISTINCT t.lane) AS lanes, count(*) FILTER (WHERE coalesce(e.status, 'pending') = 'pending') AS pending
           FROM tasks t LEFT JOIN executions e ON e.id = t.last_execution_id
          WHERE t.lane LIKE 'accept-%' AND t.lane NOT LIKE 'accept-warm-%'`,
      );
      const answeredAt = performance.now();
      let stored = await countStored();
      const atAnswer = Number(stored.rows[0]?.n ?? 0);
      while (Number(stored.rows[0]?.n ?? 0) < accepted && performance.now() - answeredAt < 30_000) {
        await new Promise((r) => setTimeout(r, 50));
        stored = await countStored();
      }
      const projectedMs = performance.now() - answeredAt;
      const inPg = Number(stored.rows[0]?.n ?? 0);
      const arrived = (await s.target.stats()).count;
      const outcomes = new Map<number, number>();
      for (const b of perBatch) outcomes.set(b.status, (outcomes.get(b.status) ?? 0) + 1);

      const notes = [
        `warm-up: ${WARMUP_BATCHES} batches of ${PER_BATCH} first (statuses ${warm.join(', ')}), not counted.`,
        `each batch is its own lane (accept-0 … accept-${BATCHES - 1}); request body ${fmt.int(bytes / 1024)} KiB; an answer comes once the batch is stored in the log; the read models follow (a later read of the organization waits for them), so Postgres is counted until it holds every task.`,
        ...failures,
        ...troubleNotes(s.service),
      ];
      if (arrived) notes.push(`target received ${arrived} requests although every task is due in 24 h.`);
      if (inPg !== accepted) notes.push(`MISMATCH: ${accepted} tasks reported created, ${inPg} in Postgres 30 s after the last answer.`);
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: 'batches (status × count)', value: [...outcomes].map(([k, v]) => `${k}×${v}`).join(', ') },
          { label: 'tasks accepted (reported created)', value: `${fmt.int(accepted)} of ${fmt.int(BATCHES * PER_BATCH)}` },
          { label: 'tasks in Postgres (lanes / pending); at the last answer; all in Postgres after it', value: `${fmt.int(inPg)} (${stored.rows[0]?.lanes ?? 0} lanes / ${fmt.int(Number(stored.rows[0]?.pending ?? 0))} pending); ${fmt.int(atAnswer)}; ${fmt.ms(projectedMs)}`, ok: inPg === accepted },
          { label: 'elapsed (sequential)', value: fmt.s(elapsed) },
          { label: 'tasks/s accepted', value: fmt.rate(rate) },
          { label: 'accept latency p50', value: fmt.ms(lat.p50) },
          { label: 'accept latency p99', value: fmt.ms(lat.p99) },
          { label: 'accept latency max', value: fmt.ms(lat.max) },
          { label: 'accept latency per task (p50 / 1,000)', value: fmt.ms(lat.p50 / PER_BATCH) },
          { label: 'target requests (should be 0)', value: fmt.int(arrived) },
        ],
        headline: [
          { label: 'batch accept p50 / p99 / max', value: `${fmt.ms(lat.p50)} / ${fmt.ms(lat.p99)} / ${fmt.ms(lat.max)}` },
          { label: 'batch accept tasks/s', value: fmt.rate(rate) },
        ],
        tables: [
          {
            title: 'Per batch (in order sent)',
            table: { headers: ['batch', 'status', 'created', 'ms'], rows: perBatch.map((b, n) => [String(n), String(b.status), fmt.int(b.created), fmt.ms(b.ms)]) },
          },
        ],
        cpu: { phase: `${BATCHES} batches`, report: cpu, units: { count: accepted, what: 'task' } },
        notes,
      };
    });
  },
};
