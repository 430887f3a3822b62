/**
 * `Idempotency-Key` replays: create one task with a key, then send the very same
 * request (same key, same body) 5,000 times at concurrency 16. Each must answer
 * the stored 201 with `Idempotent-Replayed: true` and the same task id, and only
 * one task may exist. Plain `GET /api/v1/tasks/<id>` at the same concurrency is
 * the reference read.
 */
import { closedLoop, type SendResult } from './load.ts';
import { troubleNotes, withStack, type Benchmark, type Metric } from './stack.ts';
import type { CpuReport } from './harness.ts';
import { fmt, summarize } from './stats.ts';

const REPLAYS = 5_000;
const CONCURRENCY = 16;
const WARMUP = 500;
const KEY = 'bench-idempotent-replay-0001';

interface Phase {
  label: string;
  ms: number[];
  elapsedMs: number;
  cpu: CpuReport;
}

export const idempotentReplay: Benchmark = {
  name: 'idempotent-replay',
  title: `Idempotency-Key replay: the same POST /api/v1/tasks ${REPLAYS.toLocaleString('en-US')} times at concurrency ${CONCURRENCY}, next to GET /api/v1/tasks/<id>`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const api = s.client(CONCURRENCY);
      // Due in 24 h: the task stays put, so nothing but the API works during the run.
      const body = JSON.stringify({ url: `${s.target.url}/hit?id=idem`, name: 'idem-1', run_at: new Date(Date.now() + 86_400_000).toISOString(), body: { hello: 'world' } });
      const headers = { 'idempotency-key': KEY };
      const replayOnce = () => api.send('POST', '/api/v1/tasks', { body, headers });

      const first = await replayOnce();
      if (first.status !== 201) throw new Error(`first create with the key answered ${first.status}: ${first.text.slice(0, 300)}`);
      const taskId = (JSON.parse(first.text) as { data: { id: string } }).data.id;
      const firstReplayed = first.headers['idempotent-replayed'];
      const getOnce = () => api.send('GET', `/api/v1/tasks/${encodeURIComponent(taskId)}`);

      // Checks every replay: 201, Idempotent-Replayed: true, same task id.
      const bad = new Map<string, number>();
      const badExamples: string[] = [];
      let replaysOk = 0;
      const judge = (r: SendResult) => {
        let problem: string | undefined;
        if (r.status !== 201) problem = `status ${r.status}`;
        else if (r.headers['idempotent-replayed'] !== 'true') problem = `Idempotent-Replayed header ${JSON.stringify(r.headers['idempotent-replayed'] ?? null)}`;
        else {
          let id: unknown;
          try {
            id = (JSON.parse(r.text) as { data?: { id?: unknown } }).data?.id;
          } catch {
            id = '(body not JSON)';
          }
          if (id !== taskId) problem = `task id ${JSON.stringify(id)}`;
        }
        if (problem) {
          bad.set(problem, (bad.get(problem) ?? 0) + 1);
          if (badExamples.length < 5) badExamples.push(`${problem}: ${r.text.slice(0, 200)}`);
        } else {
          replaysOk++;
        }
      };
      const getOutcomes = new Map<number, number>();

      // Warm-up both paths (counted in the checks too: every replay must be right).
      await closedLoop({ concurrency: CONCURRENCY, maxCount: WARMUP, maxMs: 30_000, fn: async () => judge(await replayOnce()) });
      await closedLoop({ concurrency: CONCURRENCY, maxCount: WARMUP, maxMs: 30_000, fn: async () => void (await getOnce()) });

      const measure = async (label: string, fn: () => Promise<SendResult>, onResult: (r: SendResult) => void): Promise<Phase> => {
        const ms: number[] = [];
        const cpuEnd = s.startCpuPhase();
        const run = await closedLoop({
          concurrency: CONCURRENCY,
          maxCount: REPLAYS,
          maxMs: 120_000,
          fn: async () => {
            const r = await fn();
            onResult(r);
            ms.push(r.ms);
          },
        });
        return { label, ms, elapsedMs: run.elapsedMs, cpu: cpuEnd() };
      };
      const replayPhase = await measure('replay POST /api/v1/tasks (same Idempotency-Key)', replayOnce, judge);
      const getPhase = await measure('GET /api/v1/tasks/<id> (reference)', getOnce, (r) => getOutcomes.set(r.status, (getOutcomes.get(r.status) ?? 0) + 1));

      const list = await api.send('GET', '/api/v1/tasks');
      const listed = list.status === 200 ? ((JSON.parse(list.text) as { data: unknown[] }).data.length) : -1;
      const inPg = Number((await s.db.query<{ n: string }>('SELECT count(*) AS n FROM tasks')).rows[0]?.n ?? 0);
      const arrived = (await s.target.stats()).count;

      const totalReplays = WARMUP + REPLAYS;
      const allGood = replaysOk === totalReplays && listed === 1 && inPg === 1;
      const rate = (p: Phase) => p.ms.length / (p.elapsedMs / 1000);
      const rp = summarize(replayPhase.ms);
      const gp = summarize(getPhase.ms);
      const serviceMs = (p: Phase) => {
        const row = p.cpu.rows.find((r) => r.name.startsWith('jetcron service'));
        return row ? ((1000 * row.cpuSeconds) / p.ms.length).toFixed(3) : '–';
      };
      const stackMs = (p: Phase) => {
        const sec = p.cpu.rows.filter((r) => !r.detail && /^(jetcron|nats-server|postgres)/.test(r.name)).reduce((a, r) => a + r.cpuSeconds, 0);
        return ((1000 * sec) / p.ms.length).toFixed(3);
      };
      const raw = ctx.rawRate;

      const metrics: Metric[] = [
        { label: 'first create', value: `${first.status}, Idempotent-Replayed ${firstReplayed === undefined ? 'absent' : JSON.stringify(firstReplayed)}, task ${taskId}` },
        { label: 'replays checked (incl. warm-up)', value: `${fmt.int(replaysOk)} of ${fmt.int(totalReplays)} were 201 + Idempotent-Replayed: true + same id`, ok: replaysOk === totalReplays },
        { label: 'wrong replays', value: [...bad].map(([k, v]) => `${k} ×${v}`).join('; ') || 'none' },
        { label: 'tasks existing (GET /api/v1/tasks / Postgres)', value: `${listed} / ${inPg}`, ok: listed === 1 && inPg === 1 },
        { label: 'replay requests/s', value: fmt.rate(rate(replayPhase)) },
        { label: 'replay latency p50 / p99', value: `${fmt.ms(rp.p50)} / ${fmt.ms(rp.p99)}` },
        { label: 'GET requests/s (reference)', value: fmt.rate(rate(getPhase)) },
        { label: 'GET latency p50 / p99 (reference)', value: `${fmt.ms(gp.p50)} / ${fmt.ms(gp.p99)}` },
        { label: 'GET outcomes', value: [...getOutcomes].map(([k, v]) => `${k}×${v}`).join(', ') },
        { label: 'replay rate / GET rate', value: fmt.frac(rate(replayPhase) / rate(getPhase)) },
        { label: 'replay rate, fraction of raw undici loop', value: raw ? fmt.frac(rate(replayPhase) / raw) : '–' },
      ];
      const notes = [
        `one key (${KEY}), one body (${Buffer.byteLength(body)} bytes, run_at 24 h ahead); warm-up: ${WARMUP} replays and ${WARMUP} GETs first; replays run before the GETs.`,
        'CPU table below: the replay phase; the per-phase table compares both.',
        ...badExamples,
        ...troubleNotes(s.service),
      ];
      if (arrived) notes.push(`target received ${arrived} requests although the task is due in 24 h.`);
      return {
        name: this.name,
        title: this.title,
        metrics,
        headline: [
          { label: 'replay requests/s, p50 / p99', value: `${fmt.rate(rate(replayPhase))}, ${fmt.ms(rp.p50)} / ${fmt.ms(rp.p99)}` },
          { label: 'GET /tasks/<id> requests/s, p50 / p99', value: `${fmt.rate(rate(getPhase))}, ${fmt.ms(gp.p50)} / ${fmt.ms(gp.p99)}` },
          { label: 'replays correct, one task', value: allGood ? 'yes' : 'NO', ok: allGood },
        ],
        tables: [
          {
            title: `Per phase (${fmt.int(REPLAYS)} requests each, concurrency ${CONCURRENCY})`,
            table: {
              headers: ['phase', 'requests/s', 'p50', 'p90', 'p99', 'max', 'service CPU ms/req', 'service+nats+pg CPU ms/req', 'machine busy'],
              rows: [replayPhase, getPhase].map((p) => {
                const x = summarize(p.ms);
                return [p.label, fmt.rate(rate(p)), fmt.ms(x.p50), fmt.ms(x.p90), fmt.ms(x.p99), fmt.ms(x.max), serviceMs(p), stackMs(p), fmt.pct(p.cpu.machineBusyPct)];
              }),
            },
          },
        ],
        cpu: { phase: 'replay phase', report: replayPhase.cpu, units: { count: replayPhase.ms.length, what: 'replay' } },
        notes,
      };
    });
  },
};
