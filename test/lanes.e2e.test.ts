import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { partitionOf } from '../src/commands/partition/partition-of.ts';
import { eventually, startTestService, type Api, type TestService, secondLog } from './support/service.ts';
import { startTarget } from './support/target.ts';

// 1 service minute = 6 ms: retries come quickly.
const SCALE = '0.0001';

/** A target that answers after `delayMs` (and `until`, when given) and records when each request started and ended. */
async function slowTarget(delayMs: number, fail: (path: string, n: number) => boolean = () => false, until: (path: string, n: number) => Promise<unknown> | undefined = () => undefined) {
  const spans: Array<{ path: string; start: number; end: number }> = [];
  const counts = new Map<string, number>();
  const target = await startTarget((req) => {
    const n = (counts.get(req.path) ?? 0) + 1;
    counts.set(req.path, n);
    spans.push({ path: req.path, start: req.at, end: req.at + delayMs });
    return { status: fail(req.path, n) ? 500 : 200, delayMs, until: until(req.path, n) };
  });
  return { ...target, spans };
}

function overlaps(spans: Array<{ start: number; end: number }>): boolean {
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  return sorted.some((s, i) => i > 0 && s.start < sorted[i - 1]!.end);
}

describe('lanes', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  let second: Running;
  let partitions: number;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: SCALE });
    ({ api, orgId } = await svc.createOrg());
    // A second process with dispatchers (and schedulers) on the same NATS and Postgres.
    const config = loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, JETCRON_TIME_SCALE: SCALE, JETCRON_ALLOW_PRIVATE_TARGETS: '1' },
      { roles: 'dispatcher,scheduler', dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-lanes-')) },
    );
    partitions = config.partitions;
    second = await serve(config, secondLog);
  });
  after(async () => {
    await second.stop();
    await svc.stop();
  });

  const finishedAll = (ids: string[]) =>
    eventually(async () => {
      const rows = await Promise.all(ids.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
      return rows.every((e) => ['success', 'failed', 'timeout', 'cancelled'].includes(e.status)) ? rows : null;
    }, 60_000);

  test('one lane runs one at a time in creation order, across two dispatcher processes; others run in parallel', async () => {
    // The lane-less requests are answered only once all four are open: they finish only if they run at once, however slow the machine.
    let freeOpen = 0;
    let allFreeOpen!: () => void;
    const freeTogether = new Promise<void>((r) => (allFreeOpen = r));
    const target = await slowTarget(80, () => false, (p, n) => {
      if (!p.startsWith('/free/') || n > 1) return undefined;
      if (++freeOpen === 4) allFreeOpen();
      return freeTogether;
    });
    try {
      const laneTasks = [];
      for (let i = 0; i < 6; i++) laneTasks.push((await api('POST', '/tasks', { url: `${target.url}/a/${i}`, lane: 'alpha' })).body.data);
      const free = [];
      for (let i = 0; i < 4; i++) free.push((await api('POST', '/tasks', { url: `${target.url}/free/${i}` })).body.data);
      await finishedAll([...laneTasks, ...free].map((t) => t.last_execution_id));
      const lane = target.spans.filter((s) => s.path.startsWith('/a/'));
      assert.equal(lane.length, 6);
      assert.equal(overlaps(lane), false, 'two requests of one lane overlapped');
      assert.deepEqual(lane.map((s) => s.path), laneTasks.map((_, i) => `/a/${i}`));
      assert.equal(freeOpen, 4, 'the four lane-less tasks were open at once');
    } finally {
      await target.close();
    }
  });

  test('the next task of a lane waits until the current one has finished its retries', async () => {
    // beta's second attempt is answered only once gamma has arrived: gamma must not wait
    // for beta's retries (an order the test can wait for, whatever the machine's speed).
    let gammaArrived!: () => void;
    const gammaSeen = new Promise<void>((r) => (gammaArrived = r));
    const target = await slowTarget(10, (p, n) => p === '/b/0' && n <= 2, (p, n) => (p === '/b/0' && n === 2 ? gammaSeen : undefined));
    // gamma calls another host: beta's failures may block beta's host (per-host backoff).
    const otherHost = await slowTarget(10, () => false, () => {
      gammaArrived();
      return undefined;
    });
    try {
      const first = (await api('POST', '/tasks', { url: `${target.url}/b/0`, lane: 'beta' })).body.data;
      const next = (await api('POST', '/tasks', { url: `${target.url}/b/1`, lane: 'beta' })).body.data;
      const other = (await api('POST', '/tasks', { url: `${otherHost.url}/c/0`, lane: 'gamma' })).body.data;
      await finishedAll([first, next, other].map((t) => t.last_execution_id));
      const order = target.spans.filter((s) => s.path.startsWith('/b/')).map((s) => s.path);
      assert.deepEqual(order, ['/b/0', '/b/0', '/b/0', '/b/1']);
      const e = (await api('GET', `/executions/${first.last_execution_id}`)).body.data;
      assert.equal(e.attempt, 3);
      assert.equal(e.status, 'success');
      // gamma did not wait for beta's retries.
      const gamma = otherHost.spans.find((s) => s.path === '/c/0')!;
      const lastBetaRetry = target.spans.filter((s) => s.path === '/b/0').at(-1)!;
      assert.ok(gamma.start < lastBetaRetry.start);
    } finally {
      await target.close();
      await otherHost.close();
    }
  });

  test('a lane keeps its order across a restart', async () => {
    const target = await slowTarget(60);
    try {
      const tasks = [];
      for (let i = 0; i < 5; i++) tasks.push((await api('POST', '/tasks', { url: `${target.url}/r/${i}`, lane: 'restart' })).body.data);
      await eventually(async () => target.spans.some((s) => s.path === '/r/0'));
      await svc.stopService();
      await svc.startService();
      // Every execution final: what ran is all that will.
      await finishedAll(tasks.map((t) => t.last_execution_id));
      const lane = target.spans.filter((s) => s.path.startsWith('/r/'));
      assert.equal(overlaps(lane), false);
      assert.deepEqual([...new Set(lane.map((s) => s.path))], tasks.map((_, i) => `/r/${i}`));
      assert.equal(lane.length, 5, `each ran once: ${lane.map((s) => s.path).join(' ')}`);
    } finally {
      await target.close();
    }
  });

  /** Another lane whose tasks the same partition owner sends as `lane`'s (found by the service's own hash). */
  const laneBeside = (lane: string) => {
    const own = partitionOf(orgId, `lane ${lane}`, partitions);
    for (let i = 0; ; i++) if (partitionOf(orgId, `lane ${lane}-probe-${i}`, partitions) === own) return `${lane}-probe-${i}`;
  };

  test('DELETE /tasks?lane= cancels the lane: the running attempt finishes and is not retried, the rest never run', async () => {
    // x/0's failure is answered only once the cancel is answered and its partition's owner has
    // read the cancel: the attempt is running during the cancel and its result comes after it,
    // whatever the machine's speed (a timed answer let a slow cancel land after a retry started).
    let ownerHasReadCancel!: () => void;
    const cancelRead = new Promise<void>((r) => (ownerHasReadCancel = r));
    const probeLane = laneBeside('cancel-me');
    const target = await slowTarget(10, (p) => p === '/x/0', (p) => {
      if (p === '/probe') ownerHasReadCancel();
      return p === '/x/0' ? cancelRead : undefined;
    });
    try {
      const tasks: Array<{ id: string; last_execution_id: string }> = [];
      for (let i = 0; i < 5; i++) tasks.push((await api('POST', '/tasks', { url: `${target.url}/x/${i}`, lane: 'cancel-me' })).body.data);
      const keep = (await api('POST', '/tasks', { url: `${target.url}/y/0`, lane: 'keep', delay: '10m' })).body.data;
      await eventually(async () => target.spans.some((s) => s.path === '/x/0'));
      const res = await api('DELETE', '/tasks?lane=cancel-me');
      assert.equal(res.status, 200);
      assert.equal(res.body.data.cancelled, 5);
      assert.match(res.body.message, /5/);
      // Created after every cancel, sent by the same owner, which reads the log in order: once the
      // probe arrives, that owner knows x/0's task is cancelled when x/0's result comes back.
      await api('POST', '/tasks', { url: `${target.url}/probe`, lane: probeLane });
      const listed = (await api('GET', '/tasks')).body.data.map((t: { id: string }) => t.id);
      for (const t of tasks) assert.ok(!listed.includes(t.id));
      assert.equal((await api('GET', `/tasks/${tasks[1]!.id}`)).status, 404);
      const rows = await finishedAll(tasks.map((t) => t.last_execution_id));
      assert.deepEqual(rows.map((e) => e.status), ['cancelled', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
      assert.equal(rows[0].attempt, 1, 'the running attempt was recorded');
      // Another lane is untouched and still runs.
      await finishedAll([keep.last_execution_id]);
      assert.ok(target.spans.some((s) => s.path === '/y/0'));
      assert.equal((await api('DELETE', '/tasks?lane=cancel-me')).body.data.cancelled, 0);
      // A task put in the lane after the cancel runs after anything still queued there.
      const marker = (await api('POST', '/tasks', { url: `${target.url}/after-cancel`, lane: 'cancel-me' })).body.data;
      await finishedAll([marker.last_execution_id]);
      assert.deepEqual(target.spans.filter((s) => s.path.startsWith('/x/')).map((s) => s.path), ['/x/0'], 'no retry, no later task');
      const missing = await api('DELETE', '/tasks');
      assert.equal(missing.status, 422);
      assert.equal(missing.body.error.field, 'lane');
    } finally {
      await target.close();
    }
  });

  test('a lane cancel records the executions still waiting on a timer as cancelled, and the lane runs again after', async () => {
    const target = await slowTarget(50, () => false);
    try {
      // 7 days is a minute here: long enough that the cancel is always first, however busy the machine.
      const later = (await api('POST', '/tasks', { url: `${target.url}/later/0`, lane: 'wait-then-cancel', delay: '7d' })).body.data;
      const res = await api('DELETE', '/tasks?lane=wait-then-cancel');
      assert.equal(res.body.data.cancelled, 1);
      const [row] = await finishedAll([later.last_execution_id]);
      assert.equal(row.status, 'cancelled');
      assert.equal(row.attempt, 0);
      // Nothing of the cancelled task holds the lane: a new task of it runs.
      const next = (await api('POST', '/tasks', { url: `${target.url}/later/1`, lane: 'wait-then-cancel' })).body.data;
      const [ran] = await finishedAll([next.last_execution_id]);
      assert.equal(ran.status, 'success');
      assert.deepEqual(target.spans.map((s) => s.path), ['/later/1']);
    } finally {
      await target.close();
    }
  });
});
