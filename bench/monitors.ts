/**
 * Heartbeat monitors at scale, service under JETCRON_TIME_SCALE=0.05 (60 s → 3 s).
 * N monitors (100,000, or 20,000 when the create rate says 100,000 would take
 * over 3 minutes), interval 60 s, grace 0. Two phases:
 *  (b) down detection, run first while nothing else is pending: 1,000 monitors
 *      pinged once each, then left alone; each should go down at its ping + 3 s;
 *      Postgres is polled for `status = 'down'` and lateness = updated_at − (last_ping_at + 3 s);
 *  (a) ping throughput: GET ping_url at concurrency 64 over the other monitors, a fixed count,
 *      right after the same loop against a forked bare `node:http` server (issue 21's
 *      yardstick for pings: "× a bare node:http server" in the same run);
 *  (c) heartbeat runs as runitor sends them: POST `/start?rid=<uuid>` then `/0?rid=<uuid>`
 *      with the job's output (a short text body), concurrency 64, a fixed count of runs.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hrMs, sleep, startTarget } from './harness.ts';
import { closedLoop, HttpClient, Outcomes } from './load.ts';
import { troubleNotes, withStack, type Benchmark } from './stack.ts';
import { fmt, summarize } from './stats.ts';

const TIME_SCALE = 0.05;
const INTERVAL_S = 60;
const EXPECTED_DOWN_MS = INTERVAL_S * 1000 * TIME_SCALE;
/** `JETCRON_BENCH_MONITORS` = a smaller count for a quick look while working (the figures to record use 100,000). */
const FULL = Number(process.env.JETCRON_BENCH_MONITORS ?? 100_000);
const FALLBACK = Math.min(FULL, 20_000);
const CREATE_BUDGET_MS = 300_000;
const PROBE = 2_000;
const CONCURRENCY = 64;
const SAMPLE = 1_000;
const PINGS = 30_000;
const PING_LIMIT_MS = 60_000;
const RUNS = 5_000;
const DOWN_WAIT_MS = 30_000;
const BARE_WARMUP_MS = 1_000;
const BARE_MS = 5_000;

const wallMs = (): number => performance.timeOrigin + performance.now();

/** GETs/s of a forked bare `node:http` server (200 `{"ok":true}`) under the closed loop phase (a) uses. */
async function bareServerRate(): Promise<number> {
  const server = await startTarget({ plain: true });
  const client = new HttpClient(server.url, CONCURRENCY);
  try {
    const get = () => client.send('GET', '/');
    await closedLoop({ concurrency: CONCURRENCY, maxCount: Number.MAX_SAFE_INTEGER, maxMs: BARE_WARMUP_MS, fn: get });
    let ok = 0;
    const run = await closedLoop({ concurrency: CONCURRENCY, maxCount: Number.MAX_SAFE_INTEGER, maxMs: BARE_MS, fn: async () => void ((await get()).status === 200 && ok++) });
    return ok / (run.elapsedMs / 1000);
  } finally {
    await client.close();
    await server.stop();
  }
}

export const monitors: Benchmark = {
  name: 'monitors',
  title: `Heartbeat monitors: ${FULL.toLocaleString('en-US')} (or ${FALLBACK.toLocaleString('en-US')}) interval monitors, ping throughput and down-detection lateness (JETCRON_TIME_SCALE=${TIME_SCALE})`,
  run(ctx) {
    return withStack(
      ctx,
      this.name,
      async (s) => {
        const creates = new Outcomes();
        const createMs: number[] = [];
        const pingPaths: string[] = [];
        const ids: string[] = [];
        const create = async (i: number) => {
          const r = await s.api.send('POST', '/api/v1/monitors', {
            body: JSON.stringify({ name: `mon-${i}`, schedule_type: 'interval', interval_seconds: INTERVAL_S, grace_period_seconds: 0 }),
          });
          creates.add(String(r.status), r.status === 201 ? undefined : r.text);
          createMs.push(r.ms);
          if (r.status === 201) {
            const d = (JSON.parse(r.text) as { data: { id: string; ping_url: string } }).data;
            pingPaths.push(new URL(d.ping_url).pathname);
            ids.push(d.id);
          }
        };

        // Probe the create rate on the first PROBE monitors, then decide on 100k or 20k.
        const c0 = hrMs();
        const probe = await closedLoop({ concurrency: CONCURRENCY, maxCount: PROBE, maxMs: 60_000, fn: (i) => create(i) });
        const probeRate = probe.started / (probe.elapsedMs / 1000);
        const projectedS = FULL / probeRate;
        // The issue asks for 100,000; the fallback is only for a machine too slow to create them in the budget.
        const target = projectedS <= (2 * CREATE_BUDGET_MS) / 1000 ? FULL : FALLBACK;
        ctx.log(`monitors: create rate ${probeRate.toFixed(0)}/s → 100,000 would take ~${projectedS.toFixed(0)} s; creating ${target}`);
        const rest = await closedLoop({ concurrency: CONCURRENCY, maxCount: target - probe.started, maxMs: CREATE_BUDGET_MS, fn: (i) => create(probe.started + i) });
        const createSeconds = (hrMs() - c0) / 1000;
        const created = creates.count('201');
        ctx.log(`monitors: ${created} created in ${createSeconds.toFixed(1)} s`);
        const c = summarize(createMs);

        // (b) down detection on the first SAMPLE monitors (never pinged so far, status 'new').
        const sample = ids.slice(0, SAMPLE);
        const samplePaths = pingPaths.slice(0, SAMPLE);
        const bOutcomes = new Outcomes();
        const b0 = wallMs();
        await closedLoop({
          concurrency: CONCURRENCY,
          maxCount: samplePaths.length,
          maxMs: 60_000,
          fn: async (i) => {
            const r = await s.api.send('GET', samplePaths[i]!);
            bOutcomes.add(String(r.status), r.status === 200 ? undefined : r.text);
          },
        });
        const bPingSeconds = (wallMs() - b0) / 1000;
        const cpuDownEnd = s.startCpuPhase();
        const downAt = new Map<string, number>();
        const pingAt = new Map<string, number>();
        const deadline = wallMs() + DOWN_WAIT_MS;
        while (wallMs() < deadline) {
          const r = await s.db.query<{ id: string; u: string; p: string | null }>(
            `SELECT id, extract(epoch FROM updated_at) * 1000 AS u, extract(epoch FROM last_ping_at) * 1000 AS p
               FROM monitors WHERE status = 'down' AND id = ANY($1)`,
            [sample],
          );
          for (const row of r.rows) {
            if (!downAt.has(row.id)) downAt.set(row.id, Number(row.u));
            if (row.p != null) pingAt.set(row.id, Number(row.p));
          }
          if (downAt.size >= sample.length) break;
          await sleep(100);
        }
        const cpuDown = cpuDownEnd();
        const lateness: number[] = [];
        for (const [id, u] of downAt) {
          const p = pingAt.get(id);
          if (p !== undefined) lateness.push(u - (p + EXPECTED_DOWN_MS));
        }
        const d = summarize(lateness);

        // (a) ping throughput over the other monitors, round-robin, after the bare server's rate.
        const bareRate = await bareServerRate();
        const others = pingPaths.slice(SAMPLE);
        const aOutcomes = new Outcomes();
        const pingMs: number[] = [];
        const cpuPingEnd = s.startCpuPhase();
        const aFromUs = Number(process.hrtime.bigint() / 1000n);
        const a = await closedLoop({
          concurrency: CONCURRENCY,
          maxCount: PINGS,
          maxMs: PING_LIMIT_MS,
          fn: async (i) => {
            const r = await s.api.send('GET', others[i % others.length]!);
            aOutcomes.add(String(r.status), r.status === 200 ? undefined : r.text);
            pingMs.push(r.ms);
          },
        });
        const cpuPing = cpuPingEnd();
        // The window of (a) for `bench/profile-phase.ts`: the service's profiles cover the whole run, creates included.
        if (ctx.cpuProfDir) {
          const dir = path.join(ctx.cpuProfDir, 'monitors');
          mkdirSync(dir, { recursive: true });
          writeFileSync(path.join(dir, 'phase.json'), JSON.stringify({ fromUs: aFromUs, toUs: Number(process.hrtime.bigint() / 1000n) }));
        }
        const accepted = aOutcomes.count('200');
        const p = summarize(pingMs);

        // (c) runs: a start and its end, each its own request, over the same monitors.
        const cOutcomes = new Outcomes();
        const runMs: number[] = [];
        const text = { 'content-type': 'text/plain', 'user-agent': 'runitor/v1.3.0 (linux-amd64; +https://bdd.fi/x/runitor)' };
        const cpuRunsEnd = s.startCpuPhase();
        const cLoop = await closedLoop({
          concurrency: CONCURRENCY,
          maxCount: RUNS,
          maxMs: PING_LIMIT_MS,
          fn: async (i) => {
            const path = others[(i * 7919) % others.length]!;
            const rid = randomUUID();
            const start = await s.api.send('POST', `${path}/start?rid=${rid}`, { headers: text });
            cOutcomes.add(`start ${start.status}`, start.status === 200 ? undefined : start.text);
            const end = await s.api.send('POST', `${path}/0?rid=${rid}`, { headers: text, body: `job ${i} done` });
            cOutcomes.add(`end ${end.status}`, end.status === 200 ? undefined : end.text);
            if (start.status === 200 && end.status === 200) runMs.push(start.ms + end.ms);
          },
        });
        const cpuRuns = cpuRunsEnd();
        const runs = runMs.length;
        const r = summarize(runMs);

        const svc = (rows: { name: string; pctOfCore: number }[]) => fmt.pct(rows.find((r) => r.name.startsWith('jetcron'))?.pctOfCore ?? NaN);
        const notes = [
          `service run with JETCRON_TIME_SCALE=${TIME_SCALE}: interval ${INTERVAL_S} s → ${EXPECTED_DOWN_MS / 1000} s, grace 0.`,
          `create rate probed on the first ${fmt.int(probe.started)} monitors: ${fmt.rate(probeRate)}, so ${fmt.int(FULL)} would take ~${fmt.s(projectedS)}; ${target === FULL ? 'created the full 100,000' : `over the ${CREATE_BUDGET_MS / 1000} s budget, so ${fmt.int(FALLBACK)} were created instead`}.`,
          `down detection ran before the ping phase so nothing else was pending; the "known time" t_i is the ping's received_at (monitors.last_ping_at), lateness = monitors.updated_at − (t_i + ${EXPECTED_DOWN_MS / 1000} s); the sample's pings took ${fmt.s(bPingSeconds)} (${bOutcomes.describe()}).`,
          `Postgres polled every 100 ms for up to ${DOWN_WAIT_MS / 1000} s; CPU of that phase: jetcron ${svc(cpuDown.rows)} of one core.`,
          ...creates.examples,
          ...aOutcomes.examples,
          ...cOutcomes.examples,
          ...bOutcomes.examples,
          ...troubleNotes(s.service),
        ];
        if (rest.started + probe.started < target) notes.push(`creation stopped at the ${CREATE_BUDGET_MS / 1000} s budget.`);
        return {
          name: this.name,
          title: this.title,
          metrics: [
            { label: 'monitors created (201)', value: `${fmt.int(created)} of ${fmt.int(probe.started + rest.started)} sent; outcomes ${creates.describe()}` },
            { label: 'create phase', value: `${fmt.s(createSeconds)} (${fmt.rate(created / createSeconds)}); latency p50 ${fmt.ms(c.p50)}, p99 ${fmt.ms(c.p99)}` },
            { label: '(a) pings accepted (200)', value: `${fmt.int(accepted)} of ${fmt.int(a.started)}; outcomes ${aOutcomes.describe()}` },
            { label: '(a) pings/s', value: fmt.rate(accepted / (a.elapsedMs / 1000)) },
            { label: '(a) fraction of raw', value: ctx.rawRate ? fmt.frac(accepted / (a.elapsedMs / 1000) / ctx.rawRate) : '–' },
            { label: `(a) bare node:http server just before (GET, c${CONCURRENCY}, ${BARE_MS / 1000} s)`, value: fmt.rate(bareRate) },
            { label: '(a) × bare node:http (issue 21 aim 6: ≥ 0.5)', value: fmt.frac(accepted / (a.elapsedMs / 1000) / bareRate), ok: accepted / (a.elapsedMs / 1000) / bareRate >= 0.5 },
            { label: '(a) ping latency p50 / p99 / max', value: `${fmt.ms(p.p50)} / ${fmt.ms(p.p99)} / ${fmt.ms(p.max)}` },
            { label: '(c) runs timed (start and end 200)', value: `${fmt.int(runs)} of ${fmt.int(cLoop.started)}; outcomes ${cOutcomes.describe()}` },
            { label: '(c) runs/s (2 pings each)', value: fmt.rate(runs / (cLoop.elapsedMs / 1000)) },
            { label: '(c) run latency (start + end answers) p50 / p99', value: `${fmt.ms(r.p50)} / ${fmt.ms(r.p99)}` },
            { label: '(c) service CPU per run', value: fmt.ms((cpuRuns.rows.find((x) => x.name.startsWith('jetcron'))?.cpuSeconds ?? NaN) * 1000 / Math.max(1, runs)) },
            { label: '(b) sample went down', value: `${fmt.int(downAt.size)} of ${fmt.int(sample.length)}`, ok: downAt.size === sample.length },
            { label: '(b) down lateness p50', value: fmt.ms(d.p50) },
            { label: '(b) down lateness p99', value: fmt.ms(d.p99) },
            { label: '(b) down lateness max', value: fmt.ms(d.max) },
            { label: '(b) down lateness min (negative = early)', value: fmt.ms(d.min) },
          ],
          headline: [
            { label: 'monitors created', value: `${fmt.int(created)} in ${fmt.s(createSeconds)}` },
            { label: 'pings/s (p50 / p99)', value: `${fmt.rate(accepted / (a.elapsedMs / 1000))} (${fmt.ms(p.p50)} / ${fmt.ms(p.p99)})` },
            { label: 'pings × bare node:http', value: `${fmt.frac(accepted / (a.elapsedMs / 1000) / bareRate)} (bare ${fmt.rate(bareRate)})` },
            { label: 'runs/s, start + end (p50 / p99)', value: `${fmt.rate(runs / (cLoop.elapsedMs / 1000))} (${fmt.ms(r.p50)} / ${fmt.ms(r.p99)})` },
            { label: 'down lateness p50 / p99 / max', value: `${fmt.ms(d.p50)} / ${fmt.ms(d.p99)} / ${fmt.ms(d.max)} (${downAt.size}/${sample.length} down)`, ok: downAt.size === sample.length },
          ],
          tables: [],
          cpu: { phase: '(a) the ping phase', report: cpuPing, units: { count: accepted, what: 'ping' } },
          notes,
        };
      },
      { plan: 'pro', env: { JETCRON_TIME_SCALE: String(TIME_SCALE) } },
    );
  },
};
