import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import type { FailureRecord } from '../src/nats/failure-ledger.ts';
import dailyOutcomes from '../examples/projections/daily-outcomes.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { replayProjection } from '../src/replay/projection.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

const root = path.resolve(import.meta.dirname, '..');

describe('jetcron replay: a new projection over the whole history', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  let nats: Nats;
  let db: Db;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let dir: string;
  before(async () => {
    svc = await startTestService();
    const org = await svc.createOrg();
    api = org.api;
    orgId = (await api('GET', '/organization')).body.data.id;
    target = await startTarget((req) => ({ status: req.path === '/fail' ? 400 : 200 }));
    nats = await connectNats(svc.natsUrl, 'replay test');
    db = connectDb(svc.databaseUrl).db;
    dir = await mkdtemp(path.join(os.tmpdir(), 'jetcron-replay-'));
  });
  after(async () => {
    await nats.close();
    await db.destroy();
    await target.close();
    await svc.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const runTasks = async (ok: number, fail: number) => {
    const ids: string[] = [];
    for (let i = 0; i < ok + fail; i++) ids.push((await api('POST', '/tasks', { url: `${target.url}/${i < ok ? 'ok' : 'fail'}`, retry_attempts: 0 })).body.data.id);
    await eventually(async () => {
      const rows = (await api('GET', '/executions?limit=100')).body.data;
      return ids.every((id) => rows.some((r: any) => r.task.id === id && r.status !== 'pending' && r.status !== 'running'));
    });
  };
  const counts = async () => {
    const rows = await sql<{ status: string; n: number }>`SELECT status, sum(executions)::int AS n FROM daily_outcomes
      WHERE org_id = ${orgId} AND source_type = 'task' GROUP BY status`.execute(db);
    return Object.fromEntries(rows.rows.map((r) => [r.status, r.n]));
  };
  const cli = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['bin/jetcron.mjs', 'replay', ...args, '--data-dir', dir], {
        cwd: root,
        env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl },
        timeout: 60_000,
      }, (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    });

  test('from the API: the history, then only what is new; a stop and a rerun count nothing twice', async () => {
    await runTasks(3, 2);
    const first = await replayProjection({ nats, db, log: () => {} }, dailyOutcomes);
    assert.ok(first.events > 0);
    assert.deepEqual(await counts(), { success: 3, failed: 2 });

    const again = await replayProjection({ nats, db, log: () => {} }, dailyOutcomes);
    assert.equal(again.last_seq >= first.last_seq, true);
    assert.deepEqual(await counts(), { success: 3, failed: 2 }, 'a rerun applies only events after the checkpoint');

    await runTasks(1, 0);
    const more = await replayProjection({ nats, db, log: () => {} }, dailyOutcomes);
    assert.ok(more.last_seq > first.last_seq);
    assert.deepEqual(await counts(), { success: 4, failed: 2 });
  });

  test('from the CLI: --from-start rebuilds the same figures; a bad module is refused', async () => {
    const run = await cli('--projection', 'examples/projections/daily-outcomes.ts', '--from-start');
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout.trim().split('\n').pop()!);
    assert.equal(out.projection, 'daily_outcomes_v1');
    assert.ok(out.events > 0 && out.last_seq >= out.events);
    assert.deepEqual(await counts(), { success: 4, failed: 2 });

    const bad = path.join(dir, 'bad.mjs');
    await writeFile(bad, 'export default { name: "x" };\n');
    const refused = await cli('--projection', bad);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /must export a projection/);
    const reserved = path.join(dir, 'reserved.mjs');
    await writeFile(reserved, 'export default { name: "read_models_v1", setup() {}, teardown() {}, apply() {} };\n');
    assert.match((await cli('--projection', reserved)).stderr, /must be lower-case letters/);
  });

  test('an event of a commit the projection keeps failing on is recorded and skipped alone; the commit\'s others are applied', async () => {
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
    const result = await replayProjection({ nats, db, log: () => {} }, projection, { fromStart: true });
    const rows = await sql<{ name: string }>`SELECT name FROM apart_probe ORDER BY name`.execute(db);
    assert.deepEqual(rows.rows.map((r) => r.name), ['r-ok-1', 'r-ok-2', 'r-ok-3']);
    const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
    const records: FailureRecord[] = [];
    for await (const key of await kv.keys('replay_apart_probe_v1.>')) records.push((await kv.get(key))!.json<FailureRecord>());
    assert.deepEqual(records.map((r) => [r.index, r.event_type, r.error]), [[2, 'TaskCreated', 'the projection cannot take r-poison']]);
    assert.ok(result.last_seq >= records[0]!.seq, 'the replay went past the commit');
  });
});
