/**
 * Analysts (CONTRACT.md § "Analysts"): the event catalogue, and `jetcron replay` of a
 * projection file outside the repository through the CLI against a real service, with
 * each selector; rebuild then replay; a throwing projection; `--follow` and Ctrl-C;
 * `db url` and `export`. Expectations are computed from the log itself (read raw).
 */
import { versionOf } from '../src/commands/upcast.ts';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { Kvm } from '@nats-io/kv';
import { Parser } from '@asyncapi/parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parquetReadObjects } from 'hyparquet';
import { KV_BUCKETS, STREAMS } from '../streams/definitions.ts';
import type { FailureRecord } from '../src/nats/failure-ledger.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { asyncApiDocument, channelPatterns, EVENT_SCHEMAS, SCHEMA_FORMAT } from '../src/commands/catalogue.ts';
import { eventsOf } from '../src/commands/commit.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { readRange } from '../src/nats/range-reader.ts';
import { PROJECTED_EVENT_TYPES } from '../src/projections/apply-event.ts';
import { replayProjection } from '../src/replay/projection.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

const root = path.resolve(import.meta.dirname, '..');

/** An analyst's file, as docs/analysts.md has them write it: imports from the package, lives anywhere. */
const COUNTS_PROJECTION = `import { defineProjection, sql, type JetcronEvent } from 'jetcron';

const poison = process.env.POISON;
export default defineProjection({
  name: 'event_counts',
  async setup(db) {
    await sql\`CREATE TABLE IF NOT EXISTS event_counts (org_id text NOT NULL, type text NOT NULL, n integer NOT NULL, PRIMARY KEY (org_id, type))\`.execute(db);
  },
  async teardown(db) {
    await sql\`DROP TABLE IF EXISTS event_counts\`.execute(db);
  },
  async apply(events, trx) {
    const counts = new Map<string, number>();
    for (const { event } of events) {
      const e: JetcronEvent = event;
      if (poison && e.type === 'TaskCreated' && e.data.task.name === poison) throw new Error(\`cannot take \${poison}\`);
      const key = \`\${e.org_id} \${e.type}\`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    for (const [key, n] of counts) {
      const [org, type] = key.split(' ');
      await sql\`INSERT INTO event_counts VALUES (\${org}, \${type}, \${n})
        ON CONFLICT (org_id, type) DO UPDATE SET n = event_counts.n + EXCLUDED.n\`.execute(trx);
    }
  },
});
`;

interface Logged { seq: number; event: JetcronEvent; subject: string; raw: Record<string, unknown> }

describe('analysts: the event catalogue, and replay from anywhere', () => {
  let svc: TestService;
  let api: Api;
  let orgA: string;
  let orgB: string;
  let apiB: Api;
  let nats: Nats;
  let db: Db;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let dir: string;
  let file: string;
  /** Between the first tasks and the second: `--since` this. */
  let middle: string;
  before(async () => {
    svc = await startTestService();
    const a = await svc.createOrg();
    api = a.api;
    orgA = (await api('GET', '/organization')).body.data.id;
    const b = await svc.createOrg();
    apiB = b.api;
    orgB = (await apiB('GET', '/organization')).body.data.id;
    target = await startTarget((req) => ({ status: req.path === '/fail' ? 400 : 200 }));
    nats = await connectNats(svc.natsUrl, 'replay test');
    db = connectDb(svc.databaseUrl).db;
    dir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-analyst-'));
    file = path.join(dir, 'event-counts.ts');
    await writeFile(file, COUNTS_PROJECTION);
    await runTasks(api, ['ok', 'ok', 'ok', 'fail', 'fail']);
    await runTasks(apiB, ['ok']);
    middle = new Date().toISOString();
    await runTasks(api, ['ok', 'fail']);
    const monitor = (await api('POST', '/monitors', { name: 'nightly', schedule_type: 'interval', interval_seconds: 3600 })).body.data;
    // Down on a failing ping, up again on the next: one closed period for the second example.
    assert.equal((await fetch(`${monitor.ping_url}/fail`)).status, 200);
    assert.equal((await fetch(monitor.ping_url)).status, 200);
    await eventually(async () => (await api('GET', `/monitors/${monitor.id}/pings`)).body.data.length === 2);
    // A batch (a commit of creates and its BatchAccepted), an endpoint and an inbound event forwarded: more channels in the log.
    const batch = await apiB('POST', '/tasks/batch', { lane: 'analysts', delay: '1h', tasks: [{ url: `${target.url}/ok` }, { url: `${target.url}/ok` }] });
    assert.equal(batch.status, 201, JSON.stringify(batch.body));
    const endpoint = (await apiB('POST', '/endpoints', { name: 'hooks', forward_urls: [`${target.url}/ok`], retry_attempts: 0 })).body.data;
    assert.equal((await fetch(endpoint.inbound_url, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } })).status, 200);
    await eventually(async () => (await apiB('GET', `/endpoints/${endpoint.id}/events`)).body.data.length === 1);
    await eventually(async () => (await apiB('GET', `/executions?task_id=${endpoint.id}`)).body.data.some((r: any) => r.status === 'success'));
  });
  after(async () => {
    await nats.close();
    await db.destroy();
    await target.close();
    await svc.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const runTasks = async (as: Api, kinds: string[]) => {
    const ids: string[] = [];
    for (const [i, kind] of kinds.entries()) ids.push((await as('POST', '/tasks', { url: `${target.url}/${kind}`, retry_attempts: 0, name: `t-${kind}-${i}` })).body.data.id);
    await eventually(async () => {
      const rows = (await as('GET', '/executions?limit=100')).body.data;
      return ids.every((id) => rows.some((r: any) => r.task.id === id && r.status !== 'pending' && r.status !== 'running'));
    });
  };
  /** The whole log as stored (raw) and as readers get it (upcast). */
  const log = async (): Promise<Logged[]> => {
    const last = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const out: Logged[] = [];
    for await (const batch of readRange(nats, { stream: STREAMS.events.name, startSeq: 1, endSeq: last, signal: new AbortController().signal, log: () => {}, name: 'test' })) {
      for (const m of batch) {
        const message = JSON.parse(Buffer.from(m.data).toString('utf8'));
        const raws: Record<string, unknown>[] = message.type === 'Commit' ? message.events : [message];
        const events = eventsOf<JetcronEvent>(JSON.parse(Buffer.from(m.data).toString('utf8')));
        events.forEach((event, i) => out.push({ seq: m.seq, event, subject: m.subject, raw: raws[i]! }));
      }
    }
    return out;
  };
  const expected = (events: Logged[], keep: (e: Logged) => boolean = () => true) => {
    const counts: Record<string, number> = {};
    for (const e of events) if (keep(e)) counts[`${e.event.org_id} ${e.event.type}`] = (counts[`${e.event.org_id} ${e.event.type}`] ?? 0) + 1;
    return counts;
  };
  const table = async () => Object.fromEntries((await sql<{ org_id: string; type: string; n: number }>`SELECT org_id, type, n FROM analytics.event_counts`.execute(db)).rows.map((r) => [`${r.org_id} ${r.type}`, r.n]));
  const cli = (args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, [path.join(root, 'bin/jetcron.mjs'), ...args, '--data-dir', dir], {
        cwd: dir, env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, ...env }, timeout: 120_000,
      }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    });
  const summary = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);
  const replay = async (...args: string[]) => {
    const run = await cli(['replay', '--projection', file, ...args]);
    assert.equal(run.code, 0, run.stderr);
    return summary(run.stdout);
  };

  test('the catalogue: AsyncAPI 3.0 that @asyncapi/parser accepts, every event type the code handles a message, served and printed alike', async () => {
    const ajv = new Ajv2020({ strict: false });
    let payloads = 0;
    const parser = new Parser();
    // The parser knows JSON Schema draft-07 only: draft 2020-12 payloads are checked against their meta-schema here.
    parser.registerSchemaParser({
      getMimeTypes: () => [SCHEMA_FORMAT],
      validate: async (input) => {
        payloads++;
        return ajv.validateSchema(input.data as object) ? [] : [{ message: ajv.errorsText(ajv.errors), path: input.path }];
      },
      parse: async (input) => {
        payloads++;
        return input.data as never;
      },
    });
    const served = await (await fetch(`${svc.url}/asyncapi.json`)).json();
    const printed = await cli(['events', 'schema']);
    assert.equal(printed.code, 0, printed.stderr);
    assert.deepEqual(JSON.parse(printed.stdout), served);
    const { document, diagnostics } = await parser.parse(JSON.stringify(served));
    assert.deepEqual(diagnostics.filter((d) => d.severity === 0).map((d) => `${d.message} at ${d.path.join('.')}`), []);
    assert.ok(document);
    assert.ok(payloads > 0, 'the payloads went through their schema format');
    const messages = document.components().messages().all().map((m) => m.id()).filter((m) => m !== 'Commit').sort();
    // The projector's handler map names every event type the code has (a compile-time complete map).
    assert.deepEqual(messages, [...PROJECTED_EVENT_TYPES].sort());
    assert.ok(document.channels().all().some((c) => c.address() === 'evt.{org_id}.creates.{shard}'));
    assert.ok(document.channels().all().some((c) => c.address() === 'evt.partition.{partition}'));
    assert.deepEqual(asyncApiDocument().info, served.info);
  });

  test('every stored event carries v, matches its schema, and sits on a channel that names its type', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    (((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => void)(ajv);
    const validators = new Map(Object.entries(EVENT_SCHEMAS).map(([t, s]) => [t, ajv.compile(JSON.parse(JSON.stringify(s)))]));
    const channels = channelPatterns();
    const problems: string[] = [];
    const events = await log();
    for (const { raw, event, subject, seq } of events) {
      if (raw.v !== versionOf(event.type)) problems.push(`seq ${seq} ${event.type}: v ${String(raw.v)}, today's is ${versionOf(event.type)}`);
      const valid = validators.get(event.type);
      if (!valid) problems.push(`seq ${seq}: ${event.type} is not in the catalogue`);
      else if (!valid(event.data)) problems.push(`seq ${seq} ${event.type}: ${ajv.errorsText(valid.errors)}`);
      if (!channels.some((c) => c.pattern.test(subject) && c.events.includes(event.type))) problems.push(`seq ${seq}: ${event.type} on ${subject} is on no channel of the catalogue`);
    }
    assert.deepEqual(problems, []);
    assert.ok(events.some((e) => e.event.org_id === '_system'), 'the system organization (partition claims) is in the log');
  });

  test('replay from a file outside the repository, with each selector, gives exactly the rows of the events in the log', async () => {
    // What the log holds up to where the replay stopped (the service may append meanwhile: an inbound delivery's result).
    const upTo = async (run: { last_seq: number }, keep: (e: Logged) => boolean = () => true) => expected((await log()).filter((e) => e.seq <= run.last_seq), keep);
    const all = await replay('--from-start');
    assert.deepEqual([all.projection, all.skipped], ['event_counts', 0]);
    assert.deepEqual(await table(), await upTo(all));

    const finished = await replay('--from-start', '--types', 'AttemptFinished,TaskCreated');
    assert.deepEqual(await table(), await upTo(finished, (e) => e.event.type === 'AttemptFinished' || e.event.type === 'TaskCreated'));
    // Other filters than the table was made with: refused, not mixed in.
    const mixed = await cli(['replay', '--projection', file, '--org', orgB]);
    assert.equal(mixed.code, 1);
    assert.match(mixed.stderr, /other --types\/--org/);

    const ofB = await replay('--from-start', '--org', orgB);
    assert.deepEqual(await table(), await upTo(ofB, (e) => e.event.org_id === orgB));
    assert.ok(Object.keys(await table()).length > 0);

    const fromSeq = Math.floor(all.last_seq / 2);
    const tail = await replay('--from-start', '--from-seq', String(fromSeq));
    assert.deepEqual(await table(), await upTo(tail, (e) => e.seq >= fromSeq));

    const since = await replay('--from-start', '--since', middle);
    const sinceRows = await upTo(since, (e) => e.event.at >= middle);
    assert.deepEqual(await table(), sinceRows);
    // After that time: two tasks of A, and B's batch of two (its single task came before).
    assert.deepEqual([sinceRows[`${orgA} TaskCreated`], sinceRows[`${orgB} TaskCreated`]], [2, 2], 'only the tasks created after that time');
  });

  test('the second example (examples/projections/reliability.ts): failures per target host per hour, and downtime per monitor', async () => {
    const run = await cli(['replay', '--projection', path.join(root, 'examples/projections/reliability.ts'), '--from-start', '--types', 'AttemptFinished,MonitorWentDown,MonitorPinged']);
    assert.equal(run.code, 0, run.stderr);
    const attempts = (await log()).filter((e) => e.seq <= summary(run.stdout).last_seq && e.event.type === 'AttemptFinished').map((e) => e.event as Extract<JetcronEvent, { type: 'AttemptFinished' }>);
    const hosts = (await sql<{ host: string; attempts: number; failed: number }>`SELECT host, sum(attempts)::int AS attempts, sum(failed)::int AS failed FROM analytics.host_failures GROUP BY host`.execute(db)).rows;
    assert.deepEqual(hosts, [{ host: new URL(target.url).host, attempts: attempts.length, failed: attempts.filter((a) => a.data.status !== 'success').length }]);
    const down = (await sql<{ reason: string; closed: boolean }>`SELECT reason, ended_at IS NOT NULL AS closed FROM analytics.monitor_downtime`.execute(db)).rows;
    assert.deepEqual(down, [{ reason: 'failed', closed: true }]);
  });

  test('a rebuild of the read models leaves the projection alone: the next replay changes nothing', async () => {
    const first = await replay('--from-start');
    const rows = await table();
    await svc.stopService();
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
    await svc.startService();
    const again = await replay();
    assert.equal(again.skipped, 0);
    const added = await log();
    // Only what the restart itself appended (claims of partitions) is new.
    assert.deepEqual(await table(), expected(added.filter((e) => e.seq <= again.last_seq)));
    assert.deepEqual(Object.fromEntries(Object.entries(rows).filter(([k]) => !k.startsWith('_system'))), Object.fromEntries(Object.entries(await table()).filter(([k]) => !k.startsWith('_system'))));
    assert.ok(again.last_seq >= first.last_seq);
  });

  test('a throwing projection: skipped and counted (exit 1), --strict stops naming the event, the next plain replay applies it', async () => {
    const poison = (await api('POST', '/tasks', { url: `${target.url}/ok`, name: 'poison-pill', delay: '1h' })).body.data;
    const strict = await cli(['replay', '--projection', file, '--strict'], { POISON: 'poison-pill' });
    assert.equal(strict.code, 1, strict.stderr);
    const stopped = summary(strict.stdout);
    assert.equal(stopped.stopped_at.type, 'TaskCreated');
    assert.match(strict.stderr, /--strict: stopped at seq \d+ #\d+, TaskCreated \S+: cannot take poison-pill/);
    assert.ok(stopped.last_seq < stopped.stopped_at.seq);

    const skipping = await cli(['replay', '--projection', file], { POISON: 'poison-pill' });
    assert.equal(skipping.code, 1, 'a skip fails the exit');
    const skipped = summary(skipping.stdout);
    assert.equal(skipped.skipped, 1);
    assert.match(skipping.stderr, /1 event\(s\) skipped/);
    const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
    const records: FailureRecord[] = [];
    for await (const key of await kv.keys('replay_analytics_event_counts.>')) records.push((await kv.get(key))!.json<FailureRecord>());
    assert.deepEqual(records.map((r) => [r.event_type ?? 'TaskCreated', r.error]), [['TaskCreated', 'cannot take poison-pill']]);

    const asked = await cli(['projections', 'retry', '--consumer', 'replay.analytics.event_counts', '--wait', '0']);
    assert.equal(asked.code, 0, asked.stderr);
    assert.match(asked.stdout, /the next `jetcron replay` of it applies it/);
    assert.doesNotMatch(asked.stdout, /no running process serving this consumer/);

    const fixed = await replay();
    assert.equal(fixed.skipped, 0);
    assert.equal((await table())[`${orgA} TaskCreated`], expected(await log())[`${orgA} TaskCreated`]);
    assert.ok(poison.id);
  });

  test('--follow keeps up with new events; Ctrl-C (SIGINT to its process group) prints the result line', async () => {
    const child = spawn(process.execPath, [path.join(root, 'bin/jetcron.mjs'), 'replay', '--projection', file, '--follow', '--data-dir', dir], {
      cwd: dir, env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl }, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await eventually(async () => /caught up, following/.test(stderr), 30_000);
    const before = (await table())[`${orgB} TaskCreated`] ?? 0;
    await apiB('POST', '/tasks', { url: `${target.url}/ok`, delay: '1h' });
    await eventually(async () => ((await table())[`${orgB} TaskCreated`] ?? 0) === before + 1, 30_000);
    process.kill(-child.pid!, 'SIGINT');
    assert.equal(await exited, 0, stderr);
    const result = summary(stdout);
    assert.deepEqual(Object.keys(result).sort(), ['events', 'last_seq', 'projection', 'seconds', 'skipped']);
    assert.ok(result.events >= 1);
  });

  test('unknown flags and bad values exit 2 with the usage', async () => {
    for (const args of [['--projection', file, '--sinse', '2h'], ['--projection', file, '--from-seq', 'abc'], ['--projection', file, '--types', 'TaskCreated,Nope'],
      ['--projection', file, '--since', 'yesterday'], ['--projection', file, '--org', 'a b'], ['--projection', file, '--schema', 'public'], ['--projection', file, '--follow', 'now']]) {
      const run = await cli(['replay', ...args]);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /usage:\n/);
    }
    const missing = await cli(['replay', '--projection', path.join(dir, 'nope.ts')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no such file/);
  });

  test('db url, and export to CSV, JSON Lines and Parquet (read back by an independent reader)', async () => {
    const url = await cli(['db', 'url']);
    assert.equal(url.stdout.trim(), svc.databaseUrl);
    const rows = (await sql<{ org_id: string; type: string; n: number }>`SELECT org_id, type, n FROM analytics.event_counts ORDER BY org_id, type`.execute(db)).rows;
    const out = (ext: string) => path.join(dir, `counts.${ext}`);
    for (const format of ['csv', 'jsonl', 'parquet']) {
      const run = await cli(['export', '--table', 'event_counts', '--format', format, '--out', out(format)]);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(summary(run.stdout).rows, rows.length);
    }
    const byKey = (list: Array<{ org_id: string; type: string; n: number }>) => list.map((r) => ({ org_id: r.org_id, type: r.type, n: Number(r.n) })).sort((a, b) => `${a.org_id} ${a.type}`.localeCompare(`${b.org_id} ${b.type}`));
    const csv = (await readFile(out('csv'), 'utf8')).trim().split('\r\n');
    assert.equal(csv[0], 'org_id,type,n');
    assert.deepEqual(byKey(csv.slice(1).map((l) => l.split(',')).map(([org_id, type, n]) => ({ org_id: org_id!, type: type!, n: Number(n) }))), byKey(rows));
    assert.deepEqual(byKey((await readFile(out('jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l))), byKey(rows));
    const bytes = await readFile(out('parquet'));
    const parquet = await parquetReadObjects({ file: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
    assert.deepEqual(byKey(parquet as never), byKey(rows));
    const none = await cli(['export', '--table', 'nothing_here', '--format', 'csv', '--out', out('x')]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no table analytics.nothing_here/);
    assert.equal((await cli(['export', '--table', 'event_counts', '--format', 'xlsx', '--out', out('x')])).code, 2);
  });

  test('from code: an event of a commit the projection keeps failing on is recorded and skipped alone; the commit\'s others are applied', async () => {
    const names = ['r-ok-1', 'r-ok-2', 'r-poison', 'r-ok-3'];
    assert.equal((await api('POST', '/tasks/batch', { lane: 'replay-apart', delay: '1h', tasks: names.map((name) => ({ url: `${target.url}/r`, name })) })).status, 201);
    const projection = {
      name: 'apart_probe_v1',
      setup: (d: Db) => sql`CREATE TABLE IF NOT EXISTS apart_probe (name text PRIMARY KEY)`.execute(d).then(() => {}),
      teardown: (d: Db) => sql`DROP TABLE IF EXISTS apart_probe`.execute(d).then(() => {}),
      async apply(events: any[], trx: any) {
        for (const { event } of events) {
          if (event.type !== 'TaskCreated' || event.data.task.lane !== 'replay-apart') continue;
          if (event.data.task.name === 'r-poison') throw new Error('the projection cannot take r-poison');
          await sql`INSERT INTO apart_probe (name) VALUES (${event.data.task.name})`.execute(trx);
        }
      },
    };
    const result = await replayProjection({ nats, db, databaseUrl: svc.databaseUrl, log: () => {} }, projection, { fromStart: true });
    const rows = await sql<{ name: string }>`SELECT name FROM analytics.apart_probe ORDER BY name`.execute(db);
    assert.deepEqual(rows.rows.map((r) => r.name), ['r-ok-1', 'r-ok-2', 'r-ok-3']);
    assert.equal(result.skipped, 1);
    const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
    const records: FailureRecord[] = [];
    for await (const key of await kv.keys('replay_analytics_apart_probe_v1.>')) records.push((await kv.get(key))!.json<FailureRecord>());
    assert.deepEqual(records.map((r) => [r.index, r.event_type, r.error]), [[2, 'TaskCreated', 'the projection cannot take r-poison']]);
    assert.ok(result.last_seq >= records[0]!.seq, 'the replay went past the commit');
  });
});
