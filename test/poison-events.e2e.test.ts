import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../streams/definitions.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import { type EventStore } from '../src/commands/store.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { decodeEvents } from '../src/nats/event-reader.ts';
import { failureKey } from '../src/nats/failure-ledger.ts';
import { parentOf } from '../src/lib/ids.ts';
import { createClock } from '../src/lib/clock.ts';
import { createTask } from '../src/commands/task/handlers.ts';
import { lastTaskEvent } from '../src/commands/task/load.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { POISON_AFTER } from '../src/nats/supervisor.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STUCK_MS = 1500;

interface Run { code: number; stdout: string; stderr: string }

describe('poison events, failure records and /healthz', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  let nats: Nats;
  let store: EventStore;
  let db: pg.Client;
  let target: Awaited<ReturnType<typeof startTarget>>;

  const cli = (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['bin/jetcron.mjs', ...args], { cwd: root, env: { PATH: process.env.PATH, NATS_URL: svc.natsUrl }, timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }));
    });
  const lines = (run: Run) => run.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const failures = async (consumer?: string) => lines(await cli('projections', 'failures', ...(consumer ? ['--consumer', consumer] : [])));
  const health = async () => {
    const res = await fetch(`${svc.url}/healthz`);
    return { status: res.status, body: await res.json() as any };
  };
  const metrics = async () => (await fetch(`${svc.url}/metrics`)).text();
  /** The projector's record of a task's create: on its own subject, or (a create of a shared commit) its commit's. */
  const recordOf = async (taskId: string) => {
    const commit = parentOf(taskId, 'cmd');
    return (await failures('projector')).find((f) => f.subject === SUBJECTS.task(orgId, taskId) || (commit !== null && f.subject === SUBJECTS.creates(orgId, commit)));
  };

  before(async () => {
    svc = await startTestService({ JETCRON_HEALTH_STUCK_MS: String(STUCK_MS) });
    ({ api, orgId } = await svc.createOrg('pro'));
    nats = await connectNats(svc.natsUrl, 'poison test');
    store = createEventStore(nats);
    db = new pg.Client({ connectionString: svc.databaseUrl });
    db.on('error', () => {}); // the outage test terminates every session of the database
    await db.connect();
    target = await startTarget();
  });
  after(async () => {
    await db.end();
    await nats.close();
    await target.close();
    await svc.stop();
  });

  test('a NUL in an event already in the log is stored safely and stops nothing', async () => {
    const created = await api('POST', '/tasks', { url: `${target.url}/nul`, name: 'clean', delay: '1h' });
    assert.equal(created.status, 201);
    const id = created.body.data.id;
    const subject = SUBJECTS.task(orgId, id);
    // Its create: in its loop turn's commit, or on its own subject.
    const last = (await lastTaskEvent(store, orgId, id)) as any;
    assert.ok(last);
    // The API refuses such a string; an older version may have let it into the log.
    const poisoned = { ...last, type: 'TaskUpdated', id: `evt_nul_${Date.now()}`, data: { task: { ...last.data.task, name: 'a\u0000b\ud800c' }, changed: ['name'] } };
    await store.append(subject, poisoned, (await store.last(subject))?.seq ?? 0);
    const got = await eventually(async () => {
      const r = await api('GET', `/tasks/${id}`);
      return r.body.data.name !== 'clean' && r.body.data;
    });
    assert.equal(got.name, 'a\uFFFDb\uFFFDc');
    // The projector goes on: a later write is read back at once.
    const next = await api('POST', '/tasks', { url: `${target.url}/after`, delay: '1h' });
    assert.equal((await api('GET', `/tasks/${next.body.data.id}`)).status, 200);
    assert.deepEqual(await failures('projector'), []);
  });

  test('a target answering NUL and non-UTF-8 bytes: stored byte for byte, nothing wedged', async () => {
    const answers: Record<string, Buffer> = {
      '/nul-bytes': Buffer.from([0x61, 0x00, 0x62, 0x00]),
      '/latin1': Buffer.from([0xff, 0xfe, 0x41, 0xe9]),
      '/text': Buffer.from('héllo ✓', 'utf8'),
    };
    target.setResponder((req) => ({ status: 200, body: answers[req.path] as unknown as string, headers: { 'Content-Type': 'application/octet-stream' } }));
    for (const [p, bytes] of Object.entries(answers)) {
      const res = await api('POST', '/tasks', { url: `${target.url}${p}` });
      assert.equal(res.status, 201);
      const exe = await eventually(async () => {
        const r = await api('GET', `/executions/${res.body.data.last_execution_id}`);
        return r.body.data?.status === 'success' && r.body.data;
      });
      const stored = exe.response_body_encoding === 'base64' ? Buffer.from(exe.response_body, 'base64') : Buffer.from(exe.response_body, 'utf8');
      assert.deepEqual(stored, bytes, p);
      assert.equal(exe.response_body_encoding, p === '/text' ? 'utf8' : 'base64', p);
    }
    target.setResponder(() => ({ status: 200, body: 'ok' }));
  });

  test('an event that does not decode is recorded and skipped by every reader; the service goes on', async () => {
    const seq = await nats.publish(`evt.${orgId}.task.tsk_garbage`, new TextEncoder().encode('{not json'));
    const recorded = await eventually(async () => {
      const all = (await failures()).filter((f) => f.seq === seq);
      return all.length >= 2 && all;
    }, 15_000, 300);
    assert.deepEqual(recorded.map((f) => f.consumer).sort(), ['notifier', 'projector']);
    for (const f of recorded) {
      assert.equal(f.subject, `evt.${orgId}.task.tsk_garbage`);
      assert.match(f.error, /JSON/);
      assert.equal(f.state, 'skipped');
    }
    assert.match(await metrics(), /jetcron_consumer_skipped_total\{consumer="projector"\} [1-9]/);
    assert.match(await metrics(), /jetcron_consumer_failures_recorded\{consumer="projector"\} [1-9]/);
    // Work still flows end to end.
    const res = await api('POST', '/tasks', { url: `${target.url}/after-garbage` });
    await eventually(async () => (await api('GET', `/executions/${res.body.data.last_execution_id}`)).body.data?.status === 'success');
    assert.equal((await health()).status, 200);
  });

  test('a projection failure that repeats is isolated, recorded, skipped; after a fix, retry applies it', async () => {
    let made: Array<{ status: number; body: any }> = [];
    await db.query(`ALTER TABLE tasks ADD CONSTRAINT poison_test CHECK (doc->>'name' IS DISTINCT FROM 'poison')`);
    try {
      // Five creates in one go: the batch holding the poison is split, the other four land.
      made = await Promise.all(['ok-1', 'ok-2', 'poison', 'ok-3', 'ok-4'].map((name) =>
        api('POST', '/tasks', { url: `${target.url}/p`, name, delay: '1h' })));
      for (const r of made) assert.equal(r.status, 201);
      const poison = made[2]!.body.data.id;
      const record = await eventually(() => recordOf(poison), 15_000, 300);
      assert.match(record.error, /poison_test/);
      assert.equal(record.attempts, 3);
      for (const r of made) {
        const got = await api('GET', `/tasks/${r.body.data.id}`);
        assert.equal(got.status, r.body.data.id === poison ? 404 : 200, r.body.data.name);
      }
      // Not fixed yet: the retry fails again and says so.
      const early = await cli('projections', 'retry', '--consumer', 'projector', '--seq', String(record.seq), '--wait', '20');
      assert.equal(early.code, 1, early.stderr);
      assert.equal(lines(early)[0].result, 'failed again');
    } finally {
      await db.query('ALTER TABLE tasks DROP CONSTRAINT poison_test');
    }
    const record = await recordOf(made[2]!.body.data.id);
    const retried = await cli('projections', 'retry', '--consumer', 'projector', '--seq', String(record.seq), '--wait', '20');
    assert.equal(retried.code, 0, retried.stdout + retried.stderr);
    assert.deepEqual(lines(retried).map((l) => l.result), ['succeeded']);
    assert.equal((await failures('projector')).some((f) => f.seq === record.seq), false);
    const [row] = (await db.query(`SELECT doc->>'name' AS name FROM tasks WHERE doc->>'name' = 'poison'`)).rows;
    assert.equal(row?.name, 'poison');
  });

  describe('a poison event inside a commit', () => {
    const names = ['c-ok-1', 'c-ok-2', 'c-poison', 'c-ok-3', 'c-ok-4'];
    const tasks = new Map<string, string>();
    let record: any;

    test('only that event is recorded (sequence and index) and skipped; the commit\'s other events land and the checkpoint moves past', async () => {
      await db.query(`ALTER TABLE tasks ADD CONSTRAINT poison_commit_test CHECK (doc->>'name' IS DISTINCT FROM 'c-poison')`);
      try {
        // A batch is one commit: five TaskCreated, then BatchAccepted.
        const res = await api('POST', '/tasks/batch', { lane: 'poison-commit', delay: '1h', tasks: names.map((name) => ({ url: `${target.url}/pc`, name })) });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        record = await eventually(async () => (await failures('projector')).find((f) => f.subject.startsWith(`evt.${orgId}.creates.`)), 15_000, 300);
        const stored = decodeEvents((await nats.jsm.streams.getMessage('EVENTS', { seq: record.seq }))!.data) as any[];
        assert.deepEqual(stored.map((e) => e.type), ['TaskCreated', 'TaskCreated', 'TaskCreated', 'TaskCreated', 'TaskCreated', 'BatchAccepted']);
        assert.equal(record.index, 2, 'the third event of the commit');
        assert.equal(record.event_id, stored[2].id);
        assert.equal(stored[2].data.task.name, 'c-poison');
        assert.equal(record.event_type, 'TaskCreated');
        assert.match(record.error, /poison_commit_test/);
        assert.equal(record.attempts, 3);
        assert.deepEqual((await failures('projector')).filter((f) => f.seq === record.seq).map((f) => f.index), [2], 'nothing else of the commit is recorded');
        const { rows } = await db.query(`SELECT id, doc->>'name' AS name FROM tasks WHERE lane = 'poison-commit'`);
        for (const r of rows) tasks.set(r.name, r.id);
        assert.deepEqual([...tasks.keys()].sort(), ['c-ok-1', 'c-ok-2', 'c-ok-3', 'c-ok-4']);
        const listed = (await api('GET', '/tasks')).body.data.filter((t: { lane: string }) => t.lane === 'poison-commit');
        assert.equal(listed.length, 4);
        const [checkpoint] = (await db.query(`SELECT seq FROM projection_checkpoints WHERE name = 'read_models_v1'`)).rows;
        assert.ok(Number(checkpoint.seq) >= record.seq, `checkpoint ${checkpoint.seq} is past seq ${record.seq}`);
      } finally {
        await db.query('ALTER TABLE tasks DROP CONSTRAINT poison_commit_test');
      }
    });

    test('a live projector goes on after it: later writes are read back at once', async () => {
      const next = await api('POST', '/tasks', { url: `${target.url}/after-commit`, name: 'after-commit', delay: '1h' });
      assert.equal(next.status, 201);
      assert.equal((await api('GET', `/tasks/${next.body.data.id}`)).status, 200);
      // A change of a task of the commit: on its own subject, read back at once.
      const put = await api('PUT', `/tasks/${tasks.get('c-ok-1')}`, { url: `${target.url}/pc`, name: 'c-ok-1-changed' });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal((await api('GET', `/tasks/${tasks.get('c-ok-1')}`)).body.data.name, 'c-ok-1-changed');
      const h = await health();
      assert.equal(h.body.consumers.projector.state, 'ok');
    });

    test('retry after the fix applies that event alone', async () => {
      const retried = await cli('projections', 'retry', '--consumer', 'projector', '--seq', String(record.seq), '--index', String(record.index), '--wait', '20');
      assert.equal(retried.code, 0, retried.stdout + retried.stderr);
      assert.deepEqual(lines(retried).map((l) => [l.result, l.index]), [['succeeded', 2]]);
      assert.equal((await failures('projector')).some((f) => f.seq === record.seq), false);
      const { rows } = await db.query(`SELECT doc->>'name' AS name, last_execution_id FROM tasks WHERE lane = 'poison-commit' ORDER BY doc->>'name'`);
      assert.deepEqual(rows.map((r) => r.name), ['c-ok-1-changed', 'c-ok-2', 'c-ok-3', 'c-ok-4', 'c-poison'], 'the other events were not applied again (c-ok-1 keeps its change)');
      const poison = rows.find((r) => r.name === 'c-poison');
      const [execution] = (await db.query(`SELECT status FROM executions WHERE id = $1`, [poison.last_execution_id])).rows;
      assert.equal(execution?.status, 'pending', 'its execution row came with it');
    });

    test('a record of a whole commit (written before events were recorded apart) is still listed, and its retry applies the commit', async () => {
      const res = await api('POST', '/tasks/batch', { lane: 'old-record', delay: '1h', tasks: [{ url: `${target.url}/o/1` }, { url: `${target.url}/o/2` }] });
      assert.equal(res.status, 201);
      const [one] = (await api('GET', '/tasks')).body.data.filter((t: { lane: string }) => t.lane === 'old-record');
      // The batch's commit: the last message of its create subject (this file's tests run one at a time).
      const last = await store.last(SUBJECTS.creates(orgId, parentOf(one.id, 'cmd')!));
      assert.ok((await store.lastMessage<any>(last!.subject))!.events.some((e) => e.data?.task?.id === one.id), 'the subject\'s last message is the batch');
      // As an older version left it: the commit skipped whole, its record keyed by sequence alone.
      await db.query(`DELETE FROM executions WHERE source_id IN (SELECT id FROM tasks WHERE lane = 'old-record')`);
      await db.query(`DELETE FROM tasks WHERE lane = 'old-record'`);
      const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
      const at = new Date().toISOString();
      await kv.put(failureKey('projector', last!.seq), JSON.stringify({
        consumer: 'projector', stream: 'EVENTS', seq: last!.seq, subject: last!.subject, error: 'an older failure', attempts: 3,
        first_failed_at: at, skipped_at: at, state: 'skipped',
      }));
      const listed = (await failures('projector')).find((f) => f.seq === last!.seq);
      assert.equal(listed?.index, undefined);
      assert.equal(listed?.error, 'an older failure');
      const retried = await cli('projections', 'retry', '--consumer', 'projector', '--seq', String(last!.seq), '--wait', '20');
      assert.equal(retried.code, 0, retried.stdout + retried.stderr);
      assert.deepEqual(lines(retried).map((l) => l.result), ['succeeded']);
      assert.equal((await db.query(`SELECT id FROM tasks WHERE lane = 'old-record'`)).rows.length, 2);
    });
  });

  test('a poison create in a commit of one loop turn\'s creates does not hide the others', async () => {
    await db.query(`ALTER TABLE tasks ADD CONSTRAINT poison_turn_test CHECK (doc->>'name' IS DISTINCT FROM 'turn-poison')`);
    let made: Array<{ state: any; seq: number }>;
    try {
      // Five single creates decided in one turn, as five requests of one turn: one commit.
      const deps = { store, clock: createClock() };
      made = await Promise.all(['turn-1', 'turn-2', 'turn-poison', 'turn-3', 'turn-4'].map((name) =>
        createTask(deps, orgId, { url: `${target.url}/turn`, name, delay: '1h' })));
      assert.equal(new Set(made.map((m) => m.seq)).size, 1, 'one message holds the five creates');
      const seq = made[0]!.seq;
      const record = await eventually(async () => (await failures('projector')).find((f) => f.seq === seq), 15_000, 300);
      assert.equal(record.index, 2);
      assert.equal(record.subject, SUBJECTS.creates(orgId, parentOf(made[2]!.state.id, 'cmd')!));
      assert.match(record.error, /poison_turn_test/);
      for (const [i, m] of made.entries()) {
        assert.equal((await api('GET', `/tasks/${m.state.id}`)).status, i === 2 ? 404 : 200, m.state.name);
      }
      // The log has the poison task all the same: commands read it from its commit.
      const put = await api('PUT', `/tasks/${made[2]!.state.id}`, { url: `${target.url}/turn`, name: 'turn-poison-renamed' });
      assert.equal(put.status, 200, JSON.stringify(put.body));
    } finally {
      await db.query('ALTER TABLE tasks DROP CONSTRAINT poison_turn_test');
    }
    // Its change, on its own subject, brings it into the read models.
    assert.equal((await api('GET', `/tasks/${made[2]!.state.id}`)).body.data.name, 'turn-poison-renamed');
  });

  test('a job that keeps failing is terminated with its content recorded, not redelivered forever', async () => {
    const seq = await nats.publish(SUBJECTS.notify(orgId), new TextEncoder().encode('not a job'));
    const record = await eventually(async () => (await failures('notifiers')).find((f) => f.seq === seq), 20_000, 300);
    assert.equal(record.attempts, 3);
    assert.equal(record.payload_bytes, 'not a job'.length);
    await eventually(async () => {
      const info = await nats.jsm.consumers.info('NOTIFY', 'notifiers');
      if (process.env.DEBUG_POISON) console.log(JSON.stringify(info));
      return info.num_ack_pending === 0 && info.num_pending === 0;
    }, 30_000);
  });

  test('/healthz: 503 naming the projector while it is stuck, 200 once it moves again', async () => {
    assert.equal((await health()).status, 200);
    const locker = new pg.Client({ connectionString: svc.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE');
      // An event the projector must write to the locked table.
      await nats.publish(SUBJECTS.task(orgId, 'tsk_healthprobe'), new TextEncoder().encode(JSON.stringify({
        type: 'TaskDeleted', id: `evt_h_${Date.now()}`, at: new Date().toISOString(), org_id: orgId,
        data: { task: { id: 'tsk_healthprobe' } },
      })));
      const stuck = await eventually(async () => {
        const h = await health();
        return h.status === 503 && h;
      }, 15_000, 250);
      assert.equal(stuck.body.status, 'degraded');
      assert.equal(stuck.body.consumers.projector.state, 'stuck');
      assert.ok(stuck.body.consumers.projector.lag > 0);
      assert.equal(stuck.body.stores.postgres, 'ok');
      assert.match(await metrics(), /jetcron_consumer_stuck\{consumer="projector"\} 1/);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
    }
    // 200 once it moves again (its first batch after the lock may leave some of the
    // backlog for the next), then caught up.
    const back = await eventually(async () => {
      const h = await health();
      return h.status === 200 && h;
    }, 15_000, 250);
    assert.equal(back.body.consumers.projector.state, 'ok');
    const caughtUp = await eventually(async () => {
      const h = await health();
      return h.status === 200 && h.body.consumers.projector.lag === 0 && h;
    }, 15_000, 250);
    assert.equal(caughtUp.body.consumers.projector.state, 'ok');
    assert.equal((await fetch(`${svc.url}/livez`)).status, 200);
  });

  test('Postgres refusing connections is transient: retried, never skipped', async () => {
    const dbName = new URL(svc.databaseUrl).pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.JETCRON_TEST_PG_URL ?? svc.databaseUrl.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    const before = (await failures('projector')).length;
    const id = `tsk_outage${Date.now()}`;
    try {
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [dbName]);
      // Written while Postgres refuses: the projector fails on it for longer than POISON_AFTER tries take.
      await nats.publish(SUBJECTS.task(orgId, id), new TextEncoder().encode(JSON.stringify({
        type: 'TaskDeleted', id: `evt_o_${Date.now()}`, at: new Date().toISOString(), org_id: orgId, data: { task: { id } },
      })));
      // Tried (and failed as transient) more times than a poison event gets before it is skipped.
      const transient = async () => Number(/jetcron_consumer_errors_total\{consumer="projector",kind="transient"\} (\d+)/.exec(await metrics())?.[1] ?? 0);
      const transientBefore = await transient();
      await eventually(async () => (await transient()) >= transientBefore + POISON_AFTER + 1, 60_000, 100);
      const h = await health();
      assert.equal(h.status, 503);
      assert.equal(h.body.stores.postgres, 'unreachable');
    } finally {
      await admin.query(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    await eventually(async () => (await health()).status === 200, 20_000, 250);
    assert.equal((await failures('projector')).length, before, 'a transient failure must not be skipped');
    assert.match(await metrics(), /jetcron_consumer_errors_total\{consumer="projector",kind="transient"\} [1-9]/);
  });
});
