import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
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
});
