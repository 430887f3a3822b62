/**
 * Interleaved A/B of inbound acceptance across builds (for a shared, noisy machine):
 * `node --import tsx bench/inbound-ab.ts <label>=<worktree> [<label>=<worktree> …]`.
 * One nats-server, database and `jetcron serve` per build, all up at once; then rounds
 * of: the bare `node:http` server for a few seconds, then each build's collect-only
 * endpoint at concurrency 64 for as long (the order rotating per round), each followed
 * by a wait until every stored request is an inbound_events row (routing keeps up).
 * Each build's fraction is taken against the bare server of its own round; CPU per
 * request (service, nats-server, Postgres, and the load generator, this process) from
 * /proc over its phase and the catch-up after it; the bare server's and the load generator's too. `AB_PROF=<dir>`:
 * a CPU profile of each build's service processes under `<dir>/<label>`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { cleanupAll, cpuPhase, createOrg, sleep, startNats, startService, startSharedPostgres, startTarget, type CpuGroup } from './harness.ts';
import { closedLoop, HttpClient, openLoop } from './load.ts';
import { summarize } from './stats.ts';

const CONCURRENCY = 64;
const SECONDS = Number(process.env.AB_SECONDS ?? 6);
const ROUNDS = Number(process.env.AB_ROUNDS ?? 4);
const WARMUP_MS = 1_000;
/** `AB_OPEN_RATE=<n>`: after each build's closed loop, `n`/s open loop for as long, its answers' p50 / p99 (the same rate for every build). */
const OPEN_RATE = Number(process.env.AB_OPEN_RATE ?? 0);
const body = `{"bid":"x","type":"bench.inbound","pad":"${'x'.repeat(980)}"}`;

interface Build {
  label: string;
  url: string;
  path: string;
  db: pg.Pool;
  groups: CpuGroup[];
  answered: number;
  rounds: Array<{ rate: number; ratio: number; cpuMs: { service: number; nats: number; pg: number; load: number }; catchUpMs: number | undefined; open?: { p50: number; p99: number } }>;
}

/** The child of a split `serve` whose roles (JETCRON_ROLES in its environment) `api` says: the API process, or the other. */
function childOf(parent: number, api: boolean): number | undefined {
  try {
    const children = readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    return children.find((pid) => {
      const roles = /(?:^|\0)JETCRON_ROLES=([^\0]*)/.exec(readFileSync(`/proc/${pid}/environ`, 'latin1'))?.[1];
      return roles !== undefined && (roles === 'api') === api;
    });
  } catch {
    return undefined;
  }
}

async function saturate(client: HttpClient, target: string, ms: number): Promise<{ ok: number; elapsedMs: number }> {
  let ok = 0;
  const run = await closedLoop({ concurrency: CONCURRENCY, maxCount: 10_000_000, maxMs: ms, fn: async () => {
    const r = await client.send('POST', target, { body });
    if (r.status === 200) ok++;
  } });
  return { ok, elapsedMs: run.elapsedMs };
}

async function main() {
  const specs = process.argv.slice(2).map((a) => {
    const [label, dir] = a.split('=');
    return { label: label!, dir: path.resolve(dir!) };
  });
  const postgres = await startSharedPostgres();
  const builds: Build[] = [];
  const stops: Array<() => Promise<void>> = [];
  try {
    for (const spec of specs) {
      // The build's own harness starts its own service (its bin/jetcron.mjs).
      const h = (await import(path.join(spec.dir, 'bench/harness.ts'))) as typeof import('./harness.ts');
      const nats = await startNats();
      stops.push(nats.stop);
      const database = await postgres.createDatabase(`ab_${spec.label}`);
      const service = await h.startService({ name: `inbound-ab-${spec.label}`, natsUrl: nats.url, databaseUrl: database.url, cpuProfDir: process.env.AB_PROF ? path.join(process.env.AB_PROF, spec.label) : undefined });
      stops.push(service.stop);
      const { apiKey } = await createOrg(nats.url, 'pro');
      const api = new HttpClient(service.url, 4, { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` });
      const r = await api.send('POST', '/api/v1/endpoints', { body: JSON.stringify({ name: 'ab', forward_urls: [], use_lane: false }) });
      await api.close();
      if (r.status !== 201) throw new Error(`${spec.label}: POST /endpoints answered ${r.status} ${r.text}`);
      const db = new pg.Pool({ connectionString: database.url, max: 2 });
      stops.push(() => db.end());
      builds.push({
        label: spec.label, url: service.url, path: new URL((JSON.parse(r.text) as { data: { inbound_url: string } }).data.inbound_url).pathname, db,
        groups: [
          { name: 'service', pid: () => service.pid, withDescendants: true },
          { name: 'api', pid: () => childOf(service.pid, true), withDescendants: false },
          { name: 'worker', pid: () => childOf(service.pid, false), withDescendants: false },
          { name: 'nats', pid: () => nats.pid(), withDescendants: false },
          { name: 'pg', pid: () => postgres.postmasterPid(), withDescendants: true },
          { name: 'load', pid: () => process.pid, withDescendants: false },
        ],
        answered: 0, rounds: [],
      });
      console.log(`${spec.label}: ${service.url} (${spec.dir})`);
    }
    const raws: number[] = [];
    const rawCpu: Array<{ server: number; load: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const server = await startTarget({ plain: true });
      const rawClient = new HttpClient(server.url, CONCURRENCY);
      await saturate(rawClient, '/', WARMUP_MS);
      const rawEnd = cpuPhase([{ name: 'server', pid: () => server.pid, withDescendants: false }, { name: 'load', pid: () => process.pid, withDescendants: false }]);
      const raw = await saturate(rawClient, '/', SECONDS * 1000);
      const rawRows = rawEnd().rows;
      const rawPer = (name: string) => (1000 * rawRows.find((x) => x.name === name)!.cpuSeconds) / raw.ok;
      rawCpu.push({ server: rawPer('server'), load: rawPer('load') });
      await rawClient.close();
      await server.stop();
      const rawRate = raw.ok / (raw.elapsedMs / 1000);
      raws.push(rawRate);
      const order = builds.map((_, i) => builds[(i + round) % builds.length]!);
      for (const b of order) {
        const client = new HttpClient(b.url, CONCURRENCY);
        b.answered += (await saturate(client, b.path, WARMUP_MS)).ok;
        const end = cpuPhase(b.groups);
        const run = await saturate(client, b.path, SECONDS * 1000);
        const loaded = end();
        await client.close();
        b.answered += run.ok;
        const t0 = performance.now();
        let catchUpMs: number | undefined;
        while (performance.now() - t0 < 60_000) {
          const n = Number((await b.db.query<{ n: string }>('SELECT count(*) AS n FROM inbound_events')).rows[0]!.n);
          if (n >= b.answered) {
            catchUpMs = performance.now() - t0;
            break;
          }
          await sleep(100);
        }
        // CPU per request counts the catch-up too: what routing and projecting left after the load is part of a request's cost.
        const cpu = end();
        let open: { p50: number; p99: number } | undefined;
        if (OPEN_RATE > 0) {
          const openClient = new HttpClient(b.url, 512);
          const ms: number[] = [];
          await openLoop({ rate: OPEN_RATE, count: OPEN_RATE * SECONDS, maxMs: 30_000, fn: async () => {
            const r = await openClient.send('POST', b.path, { body });
            if (r.status === 200) {
              ms.push(r.ms);
              b.answered++;
            }
          } });
          await openClient.close();
          const s = summarize(ms);
          open = { p50: s.p50, p99: s.p99 };
        }
        const rate = run.ok / (run.elapsedMs / 1000);
        const per = (name: string) => (1000 * cpu.rows.find((x) => x.name === name)!.cpuSeconds) / run.ok;
        b.rounds.push({ rate, ratio: rate / rawRate, cpuMs: { service: per('service'), nats: per('nats'), pg: per('pg'), load: per('load') }, catchUpMs, ...(open ? { open } : {}) });
        const others = loaded.rows.find((x) => x.name === 'other processes on the machine')!;
        console.log(`round ${round + 1} ${b.label}: ${rate.toFixed(0)}/s = ${(rate / rawRate).toFixed(3)} of bare ${rawRate.toFixed(0)}/s; CPU ms/request service ${per('service').toFixed(3)} (API process ${per('api').toFixed(3)}, the other ${per('worker').toFixed(3)}) nats ${per('nats').toFixed(3)} pg ${per('pg').toFixed(3)} load generator ${per('load').toFixed(3)}; routed ${catchUpMs === undefined ? 'NOT within 60 s' : `${(catchUpMs / 1000).toFixed(2)} s after`}; other processes ${others.pctOfCore.toFixed(0)}% of a core${open ? `; open loop ${OPEN_RATE}/s p50 / p99 ${open.p50.toFixed(1)} / ${open.p99.toFixed(1)} ms` : ''}`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
    console.log(`\nbare node:http per round: ${raws.map((r) => r.toFixed(0)).join(', ')}/s; CPU ms/request of the bare server ${rawCpu.map((c) => c.server.toFixed(3)).join(', ')}, of the load generator ${rawCpu.map((c) => c.load.toFixed(3)).join(', ')}`);
    for (const b of builds) {
      const g = (await b.db.query<{ n: string; m: string }>('SELECT count(*) AS n, count(DISTINCT inbound_seq) AS m FROM inbound_events')).rows[0]!;
      console.log(`${b.label}: ${g.n} requests in ${g.m} INBOUND messages (${(Number(g.n) / Number(g.m)).toFixed(1)} a message)`);
    }
    for (const b of builds) {
      const cpu = (k: 'service' | 'nats' | 'pg' | 'load') => median(b.rounds.map((r) => r.cpuMs[k]));
      console.log(`${b.label}: fraction of bare ${b.rounds.map((r) => r.ratio.toFixed(3)).join(', ')} (median ${median(b.rounds.map((r) => r.ratio)).toFixed(3)}); accepted/s ${b.rounds.map((r) => r.rate.toFixed(0)).join(', ')}; CPU ms/request medians service ${cpu('service').toFixed(3)}, nats ${cpu('nats').toFixed(3)}, pg ${cpu('pg').toFixed(3)} = ${(cpu('service') + cpu('nats') + cpu('pg')).toFixed(3)}, load generator ${cpu('load').toFixed(3)}${OPEN_RATE ? `; open loop ${OPEN_RATE}/s p50 ${b.rounds.map((r) => r.open!.p50.toFixed(1)).join(', ')} ms, p99 ${b.rounds.map((r) => r.open!.p99.toFixed(1)).join(', ')} ms` : ''}`);
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await cleanupAll();
  }
}

main().catch(async (err) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
