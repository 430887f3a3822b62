/**
 * Interleaved A/B of `jetcron projections rebuild` across builds (for a shared, noisy
 * machine): `node bench/rebuild-ab.ts <label>=<worktree> [<label>=<worktree> …]`.
 * The stores of the rebuild benchmark are written once (one nats-server per shape,
 * `JETCRON_BENCH_REBUILD_SHAPES`, default both); then `AB_ROUNDS` rounds (default 2)
 * in which every build, in an order that rotates, runs its own CLI's rebuild and then
 * its replay of the example against a fresh database, for each shape. Per run: events/s
 * from the seconds the CLI printed, and the CPU seconds of the CLI, Postgres, nats-server
 * and everything else on the machine over it. `AB_PROF=<dir>`: each CLI run profiled
 * under `<dir>/<label>-<shape>-<command>-<round>`. `AB_OWN_POSTGRES=1`: each build
 * against an embedded Postgres started by its own code (its own server settings, e.g.
 * `wal_level`), not one server for all.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cleanupAll, startNats, startSharedPostgres, withClient, type CpuReport } from './harness.ts';
import { buildEventStore, EXAMPLE, runCli, stagesOf, type StoreShape } from './rebuild.ts';

const ROUNDS = Number(process.env.AB_ROUNDS ?? 2);
const SHAPES = (process.env.JETCRON_BENCH_REBUILD_SHAPES ?? 'commits,events').split(',').map((x) => x.trim()) as StoreShape[];

const TABLES = ['tasks', 'executions', 'execution_attempts', 'schedules', 'monitors', 'pings', 'endpoints', 'inbound_events', 'daily_outcomes'];

/** A digest of every row of the read models (and the example's table): equal digests, equal rows. */
const digestOf = (url: string) => withClient(url, async (c) => {
  const parts = await Promise.all(TABLES.map(async (t) => (await c.query<{ d: string }>(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS d FROM ${t} t`)).rows[0]!.d));
  return parts.map((d) => d.slice(0, 6)).join('');
});

const cpuOf = (r: CpuReport) => r.rows.filter((x) => !x.detail).map((x) => x.cpuSeconds.toFixed(2));

async function main() {
  const builds = process.argv.slice(2).map((a) => {
    const [label, dir] = a.split('=');
    return { label: label!, dir: path.resolve(dir!) };
  });
  const shared = process.env.AB_OWN_POSTGRES === '1' ? undefined : await startSharedPostgres();
  const servers = new Map<string, Awaited<ReturnType<typeof startSharedPostgres>>>();
  for (const build of builds) {
    const own = async () => startSharedPostgres((await import(pathToFileURL(path.join(build.dir, 'src/runtime/embedded-postgres.ts')).href)).startEmbeddedPostgres);
    servers.set(build.label, shared ?? await own());
  }
  const stores: { shape: StoreShape; url: string; pid: () => number | undefined; events: number; messages: number }[] = [];
  for (const shape of SHAPES) {
    const nats = await startNats();
    const { events, messages } = await buildEventStore(nats.url, shape);
    stores.push({ shape, url: nats.url, pid: nats.pid, events, messages });
    console.log(`store ${shape}: ${events} events in ${messages} messages`);
  }
  console.log('| round | build | shape | rebuild events/s (s) | stages s: tables / projecting / indexes | replay events/s (s) | rebuild CPU s: CLI / postgres / nats-server / other | replay CPU s: CLI / postgres / nats-server / other | rows digest |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (let round = 0; round < ROUNDS; round++) {
    for (let b = 0; b < builds.length; b++) {
      const build = builds[(b + round) % builds.length]!;
      const postgres = servers.get(build.label)!;
      for (const store of stores) {
        const database = await postgres.createDatabase(`ab_${build.label}_${store.shape}`);
        try {
          const env = { NATS_URL: store.url, DATABASE_URL: database.url };
          const groups = (pid: () => number | undefined) => [
            { name: 'jetcron CLI (node)', pid, withDescendants: true },
            { name: 'postgres (all backends)', pid: () => postgres.postmasterPid(), withDescendants: true },
            { name: 'nats-server', pid: store.pid, withDescendants: false },
          ];
          const prof = (what: string) => (process.env.AB_PROF ? path.join(process.env.AB_PROF, `${build.label}-${store.shape}-${what}-${round}`) : undefined);
          let rebuilt;
          try {
            rebuilt = await runCli(['projections', 'rebuild'], env, groups, prof('rebuild'), build.dir);
          } catch (err) {
            console.log(`| ${round + 1} | ${build.label} | ${store.shape} | failed: ${(err as Error).message.split('\n').slice(-8).join(' ').slice(0, 300)} | | | | | |`);
            continue;
          }
          const replayed = await runCli(['replay', '--projection', EXAMPLE, '--from-start'], env, groups, prof('replay'), build.dir);
          const rs = Number(rebuilt.printed.seconds);
          const ps = Number(replayed.printed.seconds);
          console.log(`| ${round + 1} | ${build.label} | ${store.shape} | ${Math.round(store.events / rs).toLocaleString('en-US')} (${rs.toFixed(1)}) | ${stagesOf(rebuilt.printed)} | ${Math.round(Number(replayed.printed.events) / ps).toLocaleString('en-US')} (${ps.toFixed(1)}) | ${cpuOf(rebuilt.cpu).join(' / ')} | ${cpuOf(replayed.cpu).join(' / ')} | ${(await digestOf(database.url)).slice(0, 18)}… |`);
        } finally {
          await database.drop();
        }
      }
    }
  }
}

main().then(cleanupAll, async (err: unknown) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
