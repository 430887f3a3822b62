/**
 * How long a fresh service takes to settle under inbound load: the bare `node:http`
 * server, then a freshly started service's collect-only endpoint, each at concurrency
 * 64 with the inbound benchmark's ~1 KB body, their rate and CPU per request step by
 * step (`WARMUP_STEP_MS`, default 2,000; `WARMUP_STEPS`, default 10), from /proc.
 * `node --import tsx bench/inbound-warmup.ts [<worktree>]` (default: this one). What
 * `bench/inbound.ts`'s warm-up length rests on.
 */
import path from 'node:path';
import { cleanupAll, cpuPhase, createOrg, startNats, startSharedPostgres, startTarget, type CpuGroup } from './harness.ts';
import { closedLoop, HttpClient } from './load.ts';

const STEP_MS = Number(process.env.WARMUP_STEP_MS ?? 2_000);
const STEPS = Number(process.env.WARMUP_STEPS ?? 10);
const CONCURRENCY = 64;
const body = `{"bid":"x","type":"bench.inbound","pad":"${'x'.repeat(980)}"}`;

async function steps(url: string, target: string, label: string, groups: CpuGroup[]): Promise<void> {
  const client = new HttpClient(url, CONCURRENCY);
  try {
    for (let i = 0; i < STEPS; i++) {
      let ok = 0;
      const end = cpuPhase(groups);
      const run = await closedLoop({ concurrency: CONCURRENCY, maxCount: 10_000_000, maxMs: STEP_MS, fn: async () => {
        if ((await client.send('POST', target, { body })).status === 200) ok++;
      } });
      const cpu = end();
      const per = (name: string) => ((1000 * cpu.rows.find((r) => r.name === name)!.cpuSeconds) / Math.max(1, ok)).toFixed(3);
      const others = cpu.rows.find((r) => r.name === 'other processes on the machine')!.pctOfCore.toFixed(0);
      console.log(`${label} ${(((i + 1) * STEP_MS) / 1000).toFixed(0)} s: ${(ok / (run.elapsedMs / 1000)).toFixed(0)}/s; CPU ms/request ${groups.map((g) => `${g.name} ${per(g.name)}`).join(', ')}; other processes ${others}% of a core`);
    }
  } finally {
    await client.close();
  }
}

async function main() {
  const dir = path.resolve(process.argv[2] ?? '.');
  // The build's own harness starts its own service (its bin/jetcron.mjs).
  const h = (await import(path.join(dir, 'bench/harness.ts'))) as typeof import('./harness.ts');
  const postgres = await startSharedPostgres();
  const nats = await startNats();
  try {
    const database = await postgres.createDatabase('inbound_warmup');
    const service = await h.startService({ name: 'inbound-warmup', natsUrl: nats.url, databaseUrl: database.url });
    const { apiKey } = await createOrg(nats.url, 'pro');
    const api = new HttpClient(service.url, 1, { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` });
    const r = await api.send('POST', '/api/v1/endpoints', { body: JSON.stringify({ name: 'warmup', forward_urls: [], use_lane: false }) });
    await api.close();
    if (r.status !== 201) throw new Error(`POST /endpoints answered ${r.status} ${r.text}`);
    const inbound = new URL((JSON.parse(r.text) as { data: { inbound_url: string } }).data.inbound_url).pathname;
    const load: CpuGroup = { name: 'load generator', pid: () => process.pid, withDescendants: false };
    const bare = await startTarget({ plain: true });
    await steps(bare.url, '/', 'bare', [{ name: 'server', pid: () => bare.pid, withDescendants: false }, load]);
    await bare.stop();
    await steps(service.url, inbound, 'jetcron', [
      { name: 'service', pid: () => service.pid, withDescendants: true },
      { name: 'nats-server', pid: () => nats.pid(), withDescendants: false },
      { name: 'postgres', pid: () => postgres.postmasterPid(), withDescendants: true },
      load,
    ]);
    await service.stop();
  } finally {
    await nats.stop();
    await cleanupAll();
  }
}

main().catch(async (err) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
