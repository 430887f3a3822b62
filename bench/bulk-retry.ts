/**
 * Issue 36's speed aims for a bulk retry: 10,000 dead letters retried by one job
 * (`POST /executions/retry`): its acceptance time, and the rate its retries are sent
 * and finished at beside 10,000 fresh tasks created by batches in the same run (aim:
 * ≥ 0.8×); the memory (RSS) of each of the service's processes during the job.
 * The dead letters are tasks that expect the body `ok`, sent during the target's
 * "outage" (it answers 200 `down`): failed at their only attempt, with no host backoff
 * (a 2xx is an answer). The outage lasts through the job, so every retry fails again
 * (a dead letter again), the shape this bench has always had. With
 * BENCH_BULK_RETRIES_SUCCEED=1 the outage is over when the job starts and the retries
 * succeed, a user's service back after an outage: each success after a failure is then
 * a recovery the notifier records (KV `notify-state`), which a fresh task is not.
 * Three jobs run, each between two rounds of the reference and set against their mean:
 * a machine whose speed drifts during the run (other work on shared cores) moves both
 * sides, not one, and the aim is judged on the median job (one job's figure moved by
 * ±0.1 between runs of the same code). Rounds before them, not counted, warm the new
 * service until its memory has settled, and a smaller job warms the retry path. Every
 * process's memory is sampled during each job: the aim is each one within 10% of its
 * start, in every job.
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { withStack, troubleNotes, type Benchmark } from './stack.ts';
import { fmt } from './stats.ts';
import { cpuPhase, type CpuReport } from './harness.ts';
import { openStatementCosts, perItem, pgStatementsAsked, type StatementCost } from './pg-statements.ts';

const N = 10_000;
/** The retries succeed (the target's outage is over when the job starts); else they fail again. */
const retriesSucceed = process.env.BENCH_BULK_RETRIES_SUCCEED === '1';
const BATCH = 1_000;
/** Fresh rounds that warm the service at most before the measured ones (see where they run). */
const WARM_ROUNDS = 8;
/** The dead letters a first job, not counted, retries (see where it runs). */
const WARM_JOB = 2_000;
/** The jobs measured, each between two fresh rounds; the aim is judged on their median (see where they run). */
const JOBS = 5;

/** RSS of each process of the tree, by `<pid> <its role or command>` (which one grows). */
function treeRssByProcess(pid: number): Map<string, number> {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out = new Map<string, number>();
  const walk = (p: number) => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      // A split serve's children are named by their roles (JETCRON_ROLES), as the CPU table names them.
      const roles = readFileSync(`/proc/${p}/environ`, 'utf8').split('\0').find((v) => v.startsWith('JETCRON_ROLES='));
      out.set(roles && roles !== 'JETCRON_ROLES=' ? `process ${roles.slice('JETCRON_ROLES='.length)}` : `process ${p} (the parent)`, Number(m?.[1] ?? 0) * 1024);
    } catch {
      return;
    }
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** CPU ms per task (of `N`) of the service, nats-server and Postgres in a phase: where a retry costs more than a fresh task. */
const perTask = (report: CpuReport) => ['jetcron service', '  of which process api', '  of which process projector', 'nats-server', 'postgres']
  .map((name) => `${name.replace('  of which ', '')} ${((report.rows.find((r) => r.name.startsWith(name))?.cpuSeconds ?? 0) * 1000 / N).toFixed(3)}`).join(', ');

export const bulkRetry: Benchmark = {
  name: 'bulk-retry',
  title: `a bulk retry of ${fmt.int(N)} dead letters beside ${fmt.int(N)} fresh tasks created by batches`,
  run(ctx) {
    return withStack(ctx, this.name, async (s) => {
      const client = s.client(64);
      const count = async (sql: string) => Number((await s.db.query<{ n: string }>(sql)).rows[0]?.n ?? 0);
      // Polled every 250 ms: each count reads the executions table whole (tens of MB by the
      // job), and polled every 50 ms that was a large share of Postgres's CPU in every phase.
      const until = async (sql: string, n: number, what: string) => {
        const t0 = performance.now();
        while ((await count(sql)) < n) {
          if (performance.now() - t0 > 300_000) throw new Error(`${what}: not ${n} within 300 s`);
          await new Promise((r) => setTimeout(r, 250));
        }
        return performance.now();
      };

      /** A service time (wall clock, ms) on the bench's monotonic clock, by a moment `since` on it: the service runs on this machine. */
      const onBenchClock = (wallMs: number, since: number) => since + (wallMs - (Date.now() - (performance.now() - since)));
      /**
       * When the last of `n` executions matching `where` finished, on the bench's clock
       * (`since` is its start there): the service's own `finished_at`, so the poll's
       * interval does not count.
       */
      const lastFinished = async (where: string, what: string, since: number, n = N) => {
        // The target's count first (no load on Postgres): a count of the executions table
        // every 250 ms was a tenth of Postgres's CPU in the job, more than in a fresh round.
        for (const t0 = performance.now(); (await s.target.stats()).count < n; await new Promise((r) => setTimeout(r, 100))) {
          if (performance.now() - t0 > 300_000) throw new Error(`${what}: the target did not see ${n} requests within 300 s`);
        }
        await until(`SELECT count(*) AS n FROM executions WHERE ${where} AND finished_at IS NOT NULL`, n, what);
        const row = (await s.db.query<{ ms: string }>(`SELECT extract(epoch FROM max(finished_at)) * 1000 AS ms FROM executions WHERE ${where}`)).rows[0];
        return onBenchClock(Number(row?.ms), since);
      };

      // The reference: fresh tasks by batches, all sent and finished (`round` names them apart).
      const freshCpu: string[] = [];
      // BENCH_PG_STATEMENTS=1: each phase's statements, per task or retry (`statements`, in the notes).
      const pgs = pgStatementsAsked() ? await openStatementCosts(s.db) : null;
      const statements = new Map<string, StatementCost[]>();
      /**
       * A phase's window: with `--cpu-prof`, `phase-<name>.json` for `bench/profile-phase.ts`
       * (the service's profiles cover the whole run); with BENCH_PG_STATEMENTS=1, its statements.
       */
      const phaseWindow = async (name: string) => {
        await pgs?.start();
        const fromUs = Number(process.hrtime.bigint() / 1000n);
        return async () => {
          const toUs = Number(process.hrtime.bigint() / 1000n);
          if (pgs) statements.set(name, await pgs.read());
          if (!ctx.cpuProfDir) return;
          const dir = path.join(ctx.cpuProfDir, 'bulk-retry');
          mkdirSync(dir, { recursive: true });
          writeFileSync(path.join(dir, `phase-${name}.json`), JSON.stringify({ fromUs, toUs }));
        };
      };
      const fresh = async (round: number) => {
        await s.target.reset();
        const cpuEnd = cpuPhase(s.cpuGroups);
        const windowEnd = await phaseWindow(`fresh${round}`);
        const t0 = performance.now();
        for (let b = 0; b < N / BATCH; b++) {
          const r = await client.send('POST', '/api/v1/tasks/batch', {
            body: JSON.stringify({ flow_control: { key: `fresh${round}-${b}`, parallelism: 1000 }, tasks: Array.from({ length: BATCH }, (_, i) => ({ url: `${s.target.url}/hit?id=fresh${round}-${b}-${i}`, name: `fresh${round}-${b}-${i}` })) }),
          });
          if (r.status !== 201) throw new Error(`batch ${b}: ${r.status} ${r.text.slice(0, 200)}`);
        }
        const t1 = await lastFinished(`source_name LIKE 'fresh${round}-%'`, `fresh tasks, round ${round}`, t0);
        freshCpu.push(`round ${round}: ${perTask(cpuEnd())}`);
        await windowEnd();
        return N / ((t1 - t0) / 1000);
      };
      // Rounds that warm the service, not counted (they drop out of the notes' CPU list): a
      // new service's first 10,000 ran at 0.6× the speed of a later round, and the owners'
      // caches fill over its first ~50,000 tasks. They run until no process grew by more
      // than 2% in the last one (at most WARM_ROUNDS): the memory aim is what the job adds
      // to a service in use, not a new one settling.
      let warmRounds = 0;
      for (let before = treeRssByProcess(s.service.pid!); warmRounds < WARM_ROUNDS;) {
        await fresh(-warmRounds++);
        const after = treeRssByProcess(s.service.pid!);
        const settled = [...after].every(([p, rss]) => rss <= (before.get(p) ?? 0) * 1.02);
        before = after;
        if (settled) break;
      }
      freshCpu.length = 0;

      /** `n` dead letters named `<prefix>-<i>`: their one attempt during the target's outage. */
      const deadLetters = async (prefix: string, n: number) => {
        await s.target.outage(true);
        let next = 0;
        await Promise.all(Array.from({ length: 64 }, async () => {
          while (next < n) {
            const i = next++;
            const r = await client.createTask({ url: `${s.target.url}/hit?id=${prefix}-${i}&outage=1`, name: `${prefix}-${i}`, retry_attempts: 0, expected_body_pattern: 'ok' });
            if (r.status !== 201) throw new Error(`dead letter ${prefix}-${i}: ${r.status}`);
          }
        }));
        await until(`SELECT count(*) AS n FROM executions WHERE source_name LIKE '${prefix}-%' AND status = 'failed' AND retried_by IS NULL`, n, `${prefix} dead letters`);
        if (retriesSucceed) await s.target.outage(false);
      };
      /** A bulk retry of `filter`, accepted: its answer's time and its job. */
      const retryAll = async (filter: Record<string, string>) => {
        const accepted = await client.send('POST', '/api/v1/executions/retry', { body: JSON.stringify({ filter }) });
        if (accepted.status !== 202) throw new Error(`bulk retry: ${accepted.status} ${accepted.text.slice(0, 300)}`);
        return { ms: accepted.ms, ...(JSON.parse(accepted.text) as { data: { id: string; total: number } }).data };
      };
      /** When job `id` was done (its last group committed), on the bench's clock from `since`. */
      const jobDone = async (id: string, since: number) => {
        await until(`SELECT count(*) AS n FROM jobs WHERE status = 'done' AND id = '${id}'`, 1, `job ${id}`);
        const row = (await s.db.query<{ ms: string }>(`SELECT extract(epoch FROM finished_at) * 1000 AS ms FROM jobs WHERE id = '${id}'`)).rows[0];
        return onBenchClock(Number(row?.ms), since);
      };

      // A smaller job first, not counted, in the same mode: the fresh path has run many rounds
      // by now, and a job on code paths never run before (the worker, a trigger at the owners,
      // the projector's retry links) set against it measured the JIT's warm-up more than the job.
      await deadLetters('warm', WARM_JOB);
      await s.target.reset();
      await jobDone((await retryAll({ error: '' })).id, performance.now());
      await lastFinished("retry_of IS NOT NULL AND source_name LIKE 'warm-%'", 'the warm-up job\'s retries', performance.now(), WARM_JOB);
      /** One job of `N` dead letters (their names `prefix-<i>`): what it measured. */
      const job = async (prefix: string, freshBefore: number, round: number) => {
        // The job's set is the dead letters made after this (a failed earlier retry is one too).
        const since = new Date().toISOString();
        await deadLetters(prefix, N);
        await s.target.reset();
        const byProcessBefore = treeRssByProcess(s.service.pid!);
        const cpuEnd = s.startCpuPhase();
        const windowEnd = await phaseWindow(`job${round - 1}`);
        const accepted = await retryAll({ error: '', finished_after: since });
        const tJob = performance.now() - accepted.ms;
        // Each process's own largest RSS: the aim is every process flat, not only their sum.
        const byProcessMax = new Map(byProcessBefore);
        const sampler = setInterval(() => {
          for (const [p, rss] of treeRssByProcess(s.service.pid!)) byProcessMax.set(p, Math.max(byProcessMax.get(p) ?? 0, rss));
        }, 500);
        // When the worker has taken the whole set (the job done) beside when the retries have all been sent and finished.
        const [tStepsEnd, tJobEnd] = await Promise.all([
          jobDone(accepted.id, tJob),
          lastFinished(`retry_of IS NOT NULL AND source_name LIKE '${prefix}-%'`, 'retries', tJob),
        ]);
        clearInterval(sampler);
        const cpu = cpuEnd();
        await windowEnd();
        const byProcessAfter = treeRssByProcess(s.service.pid!);
        const mib = (b: number) => fmt.int(b / 2 ** 20);
        const growth = [...byProcessAfter].map(([p, after]) => `${p}: ${mib(byProcessBefore.get(p) ?? 0)} → max ${mib(byProcessMax.get(p) ?? after)} → ${mib(after)} MiB`).join('; ');
        /** The process that grew most during the job, as a share of its RSS at the start. */
        const worst = [...byProcessMax].map(([p, max]) => [p, max / (byProcessBefore.get(p) ?? max) - 1] as const)
          .reduce((a, b) => (b[1] > a[1] ? b : a), ['none', 0] as const);
        const retryRate = N / ((tJobEnd - tJob) / 1000);
        // The reference again, after the job, on the machine as it is then.
        const freshAfter = await fresh(round);
        return {
          k: round - 1, acceptedMs: accepted.ms, total: accepted.total, setRate: N / ((tStepsEnd - tJob) / 1000), retryRate, freshAfter,
          ratio: retryRate / ((freshBefore + freshAfter) / 2), worst, growth, cpu,
        };
      };

      // JOBS jobs, each between two fresh rounds and set against their mean: one job's figure
      // moved by ±0.15 within a run and between runs of the same code (the machine's other
      // work: the jobs of one run spread from 0.65 to 0.98), so the aim is judged on the
      // median of five jobs, and each process's memory in every job.
      const jobs: Array<Awaited<ReturnType<typeof job>>> = [];
      const freshRates = [await fresh(1)];
      for (let k = 1; k <= JOBS; k++) {
        const run = await job(`dead${k}`, freshRates.at(-1)!, k + 1);
        jobs.push(run);
        freshRates.push(run.freshAfter);
      }
      const median = [...jobs].sort((a, b) => a.ratio - b.ratio)[Math.floor(JOBS / 2)]!;
      const slowestAccept = Math.max(...jobs.map((j) => j.acceptedMs));
      const worst = jobs.map((j) => j.worst).reduce((a, b) => (b[1] > a[1] ? b : a));
      const each = (f: (j: (typeof jobs)[number]) => string) => jobs.map(f).join(' / ');
      return {
        name: this.name,
        title: this.title,
        metrics: [
          { label: `job accepted in, each of ${JOBS} jobs (aim ≤ 1 s)`, value: each((j) => fmt.ms(j.acceptedMs)), ok: slowestAccept <= 1000 },
          { label: 'job set', value: each((j) => fmt.int(j.total)), ok: jobs.every((j) => j.total === N) },
          { label: 'fresh tasks by batches: created to all finished, each round (before the first job, then after each)', value: freshRates.map(fmt.rate).join(' / ') },
          { label: 'the job: accepted to its set taken (its last group committed)', value: each((j) => fmt.rate(j.setRate)) },
          { label: 'retries: accepted to all finished', value: each((j) => fmt.rate(j.retryRate)) },
          { label: 'retries ÷ fresh, each job against the mean of the rounds before and after it', value: each((j) => j.ratio.toFixed(2)) },
          { label: 'retries ÷ fresh, the median job (aim ≥ 0.8)', value: median.ratio.toFixed(2), ok: median.ratio >= 0.8 },
          { label: 'the process that grew most in any job: its max during the job over its start (aim every process within 10%)', value: `${worst[0]} +${(worst[1] * 100).toFixed(1)}%`, ok: worst[1] <= 0.1 },
        ],
        headline: [
          { label: 'bulk retry accept', value: fmt.ms(slowestAccept) },
          { label: 'bulk retry ÷ fresh rate', value: median.ratio.toFixed(2) },
        ],
        tables: [],
        cpu: { phase: 'the median job', report: median.cpu, units: { count: N, what: 'retry' } },
        notes: [
          `each job takes its set in groups of 1,000, each group's retries and its RetryJobStepped one commit on the jobs subject; the fresh tasks are 10 batches of 1,000, each under a flow-control key of parallelism 1,000, run before the first job and after each, after ${warmRounds} rounds that are not counted (a new service's warm-up, until no process grew by more than 2% in a round) and a job of ${fmt.int(WARM_JOB)} dead letters, not counted either (the retry path's warm-up); ${retriesSucceed ? "the retries succeed (BENCH_BULK_RETRIES_SUCCEED=1: the target's outage is over)" : 'the retries fail again (the target\'s outage lasts)'}.`,
          ...jobs.map((j, i) => `job ${i + 1}: RSS by process, the job's start → its max during the job → the end: ${j.growth}.`),
          `CPU ms per fresh task, ${freshCpu.join('; ')}; per retry, ${jobs.map((j, i) => `job ${i + 1}: ${perTask(j.cpu)}`).join('; ')}.`,
          ...(pgs ? [`Postgres statements (BENCH_PG_STATEMENTS=1), per retry of the median job (job ${median.k}): ${perItem(statements.get(`job${median.k}`) ?? [], N)}. Per fresh task of the round after it: ${perItem(statements.get(`fresh${median.k + 1}`) ?? [], N)}.`] : []),
          ...troubleNotes(s.service),
        ],
      };
    }, { plan: 'pro' });
  },
};
