/**
 * Crash consistency of the dispatch path: a dispatcher process killed with SIGKILL
 * while it holds many jobs, then a new dispatcher process.
 *
 * Real parts only: a nats-server, Postgres, local HTTP targets, and `jetcron serve
 * --roles dispatcher` as child processes. The other roles (api, projector, scheduler,
 * notifier) run in this process through serve(), so the only dispatchers are the
 * children: the one killed, then the one started after it.
 *
 * The `dispatchers` consumer's ack wait is 15 s: the jobs the killed process had
 * pulled come back only then, so every wait below leaves room for it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { createOrgWithKey, readExecutionEvents, spawnJetcron, type JetcronProcess, type LoggedEvent } from './support/jetcron-process.ts';
import { startTestNats } from './support/nats.ts';
import { createTestDatabase } from './support/postgres.ts';
import { apiClient, eventually, type Api } from './support/service.ts';
import { startTarget } from './support/target.ts';

/** The `dispatchers` consumer's ack wait (streams/definitions.ts). */
const ACK_WAIT_MS = 15_000;
/** After the kill, everything must be done within the ack wait plus this (a loaded 2-core machine). */
const DRAIN_MARGIN_MS = 25_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the target saw: one entry per request, with when it arrived and when its answer was due. */
interface Span {
  path: string;
  /** When the request had arrived (its body read). */
  at: number;
  /** The answer is sent no earlier than this (the responder's delay): a request still open at the kill ends after it. */
  end: number;
  exe: string;
  task: string;
}

interface Stack {
  nats: Nats;
  natsUrl: string;
  databaseUrl: string;
  pgc: pg.Client;
  orgId: string;
  api: Api;
  /** Lines of the in-process service (api, projector, scheduler, notifier). */
  logs: string[];
  children: JetcronProcess[];
  spawnDispatcher(label: string): Promise<JetcronProcess>;
  /** DISPATCH holds no job and the consumer has none pending or unacked: every job ran and was acked. */
  dispatchIdle(): Promise<boolean>;
  statusCounts(): Promise<Record<string, number>>;
  dump(extra?: string[]): void;
  cleanup(): Promise<void>;
}

/** NATS, a database, the non-dispatcher roles in this process and an organization; dispatchers are spawned by the test. */
async function startStack(t: TestContext, label: string): Promise<Stack> {
  const steps: Array<() => unknown> = [];
  const cleanup = async () => {
    for (const step of steps.reverse()) await Promise.resolve().then(step).catch((err: Error) => process.stderr.write(`cleanup: ${err.message}\n`));
  };
  try {
    const [testNats, db] = await Promise.all([startTestNats(), createTestDatabase()]);
    steps.push(() => testNats.stop(), () => db.drop());
    const logs: string[] = [];
    const t0 = Date.now();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), `jetcron-test-${label}-`));
    steps.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = loadConfig({
      NATS_URL: testNats.url, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', JETCRON_ALLOW_PRIVATE_TARGETS: '1',
      JETCRON_RATE_LIMIT_FREE: '0', JETCRON_RATE_LIMIT_PRO: '0',
    }, { roles: 'api,projector,scheduler,notifier', dataDir });
    const main: Running = await serve(config, (m) => {
      logs.push(`[main +${((Date.now() - t0) / 1000).toFixed(2)}s] ${m}`);
      if (process.env.JETCRON_TEST_LOG) process.stderr.write(`${logs.at(-1)}\n`);
    });
    steps.push(() => main.stop());
    const nats = await connectNats(testNats.url, `${label} test admin`);
    steps.push(() => nats.close());
    const pgc = new pg.Client({ connectionString: db.url });
    pgc.on('error', () => {});
    await pgc.connect();
    steps.push(() => pgc.end());
    const org = await createOrgWithKey(testNats.url);
    const children: JetcronProcess[] = [];
    steps.push(() => Promise.all(children.map((c) => c.cleanup())));
    return {
      nats,
      natsUrl: testNats.url,
      databaseUrl: db.url,
      pgc,
      orgId: org.orgId,
      api: apiClient(() => main.url!, org.apiKey),
      logs,
      children,
      async spawnDispatcher(name) {
        const c = await spawnJetcron({ roles: 'dispatcher', natsUrl: testNats.url, databaseUrl: db.url, label: name });
        children.push(c);
        return c;
      },
      async dispatchIdle() {
        // Partition owners keep no queue outside the log: the read model's final rows say it all.
        return true;
      },
      async statusCounts() {
        const rows = (await pgc.query<{ status: string; n: string }>('SELECT status, count(*) AS n FROM executions WHERE org_id = $1 GROUP BY status', [org.orgId])).rows;
        return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
      },
      dump(extra = []) {
        const out = [...extra, '--- in-process service (api, projector, scheduler, notifier) ---', ...logs.slice(-100)];
        for (const c of children) out.push(`--- ${c.label} (pid ${c.pid}) ---`, ...c.lines.slice(-60));
        process.stderr.write(`${out.join('\n')}\n`);
        t.diagnostic(`logs written to stderr (${out.length} lines)`);
      },
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** Every event of the organization's executions, grouped by execution id, in stream order. */
async function executionEvents(nats: Nats, orgId: string): Promise<Map<string, LoggedEvent[]>> {
  const byExe = new Map<string, LoggedEvent[]>();
  for (const e of await readExecutionEvents(nats, orgId)) {
    const exe = String(e.event.data.execution_id);
    const list = byExe.get(exe) ?? [];
    list.push(e);
    byExe.set(exe, list);
  }
  return byExe;
}

/**
 * Problems with one execution's log: exactly one AttemptFinished per attempt, all success
 * at attempt 1, an AttemptStarted at most per time the request was sent (`sends`, seen at
 * the target: a slow attempt records its start, and one sent again after the kill may
 * record it again, however fast the machine) and before the result, nothing else.
 */
function logProblems(exe: string, events: LoggedEvent[], sends: number): string[] {
  const problems: string[] = [];
  const finished = events.filter((e) => e.event.type === 'AttemptFinished');
  const started = events.filter((e) => e.event.type === 'AttemptStarted');
  const other = events.filter((e) => e.event.type !== 'AttemptFinished' && e.event.type !== 'AttemptStarted');
  const perAttempt = new Map<number, number>();
  for (const f of finished) perAttempt.set(f.event.data.attempt, (perAttempt.get(f.event.data.attempt) ?? 0) + 1);
  if (finished.length === 0) problems.push(`${exe}: no AttemptFinished in the log`);
  for (const [attempt, n] of perAttempt) if (n !== 1) problems.push(`${exe}: ${n} AttemptFinished for attempt ${attempt} (seqs ${finished.filter((f) => f.event.data.attempt === attempt).map((f) => f.seq).join(', ')})`);
  if ([...perAttempt.keys()].some((a) => a !== 1)) problems.push(`${exe}: attempts recorded ${[...perAttempt.keys()].join(', ')}, expected only 1`);
  for (const f of finished) if (f.event.data.status !== 'success') problems.push(`${exe}: AttemptFinished ${f.event.data.attempt} is ${f.event.data.status}`);
  if (started.length > Math.max(1, sends)) problems.push(`${exe}: ${started.length} AttemptStarted for ${sends} request(s) sent`);
  if (started[0] && finished[0] && started[0].seq > finished[0].seq) problems.push(`${exe}: AttemptStarted (seq ${started[0].seq}) after AttemptFinished (seq ${finished[0].seq})`);
  if (other.length) problems.push(`${exe}: unexpected events ${other.map((e) => e.event.type).join(', ')}`);
  return problems;
}

test('kill -9 of a dispatcher mid-batch: every execution reaches its target under its one id and is recorded finished exactly once', { timeout: 120_000 }, async (t) => {
  const TASKS = 300;
  const t0 = Date.now();
  const stack = await startStack(t, 'crash-batch');
  const notes: string[] = [];
  const note = (m: string) => {
    notes.push(`[+${((Date.now() - t0) / 1000).toFixed(2)}s] ${m}`);
    if (process.env.JETCRON_TEST_LOG) process.stderr.write(`${notes.at(-1)}\n`);
  };
  const spans: Span[] = [];
  // 300–800 ms per answer, spread by task: many attempts are open at any moment.
  const delayOf = (i: number) => 300 + ((i * 7919) % 501);
  const target = await startTarget((req) => {
    const i = Number(req.path.split('/').at(-1));
    const delayMs = Number.isInteger(i) ? delayOf(i) : 0;
    spans.push({ path: req.path, at: req.at, end: req.at + delayMs, exe: String(req.headers['x-jetcron-execution-id']), task: String(req.headers['x-jetcron-task-id']) });
    return { status: 200, body: 'ok', delayMs };
  });
  let failed = true;
  try {
    const first = await stack.spawnDispatcher('dispatcher-1');
    note(`dispatcher-1 spawned (pid ${first.pid})`);

    // Created 16 at a time; the kill does not wait for the creates to end.
    const created: Array<{ taskId: string; exeId: string } | undefined> = new Array(TASKS);
    const createErrors: string[] = [];
    let next = 0;
    const creating = Promise.all(Array.from({ length: 16 }, async () => {
      while (next < TASKS) {
        const i = next++;
        const res = await stack.api('POST', '/tasks', { url: `${target.url}/t/${i}`, name: `t${i}` });
        if (res.status !== 201) createErrors.push(`task ${i}: ${res.status} ${JSON.stringify(res.body)}`);
        else created[i] = { taskId: res.body.data.id, exeId: res.body.data.last_execution_id };
      }
    }));

    // Kill once plenty of attempts are open at the target and stay open past the kill.
    const open = () => {
      const now = Date.now();
      return spans.filter((s) => s.end > now + 100).length;
    };
    await eventually(async () => open() >= 30 && new Set(spans.map((s) => s.path)).size >= 40, 60_000, 5)
      .catch((err: Error) => assert.fail(`never 30 attempts open at the target at once (${spans.length} requests so far): ${err.message}`));
    process.kill(first.pid, 'SIGKILL');
    const killedAt = Date.now();
    // Answered after the kill returned: the killed process never got these answers.
    const interrupted = spans.filter((s) => s.end > killedAt);
    const arrivedBefore = new Set(spans.map((s) => s.path)).size;
    note(`SIGKILL dispatcher-1: ${interrupted.length} requests open at the target, ${arrivedBefore} tasks had arrived, ${created.filter(Boolean).length} created`);
    await first.kill9();

    const second = await stack.spawnDispatcher('dispatcher-2');
    note(`dispatcher-2 spawned (pid ${second.pid})`);
    await creating;
    assert.deepEqual(createErrors, [], 'every create answers 201');
    note(`all ${TASKS} tasks created`);

    // Done: every task arrived, every execution is success in the read model, and DISPATCH is empty (nothing left to redeliver).
    const allArrived = () => {
      const seen = new Set(spans.map((s) => s.path));
      return created.every((_, i) => seen.has(`/t/${i}`));
    };
    let counts: Record<string, number> = {};
    await eventually(async () => {
      counts = await stack.statusCounts();
      return allArrived() && counts.success === TASKS && (await stack.dispatchIdle());
    }, ACK_WAIT_MS + DRAIN_MARGIN_MS - (Date.now() - killedAt), 250).catch(async (err: Error) => {
      const missing = created.map((c, i) => (spans.some((s) => s.path === `/t/${i}`) ? null : i)).filter((x) => x !== null);
      assert.fail(`not done ${Date.now() - killedAt} ms after the kill: statuses ${JSON.stringify(counts)}, ${missing.length} tasks never arrived (${missing.slice(0, 20).join(', ')}), dispatch idle: ${await stack.dispatchIdle().catch(() => 'unknown')} (${err.message})`);
    });
    const doneAt = Date.now();
    note(`all done ${doneAt - killedAt} ms after the kill`);
    // A late duplicate would show up here.
    await sleep(500);

    const problems: string[] = [];
    // The target: each task reached, every request under the task's one execution id.
    const known = new Set(created.map((_, i) => `/t/${i}`));
    for (const s of spans) if (!known.has(s.path)) problems.push(`request for an unknown path ${s.path}`);
    let resent = 0;
    created.forEach((c, i) => {
      const got = spans.filter((s) => s.path === `/t/${i}`);
      if (got.length === 0) problems.push(`task ${i} never reached the target`);
      const ids = new Set(got.map((s) => s.exe));
      if (ids.size !== 1 || !ids.has(c!.exeId)) problems.push(`task ${i}: execution ids [${[...ids].join(', ')}], expected only ${c!.exeId}`);
      if (got.some((s) => s.task !== c!.taskId)) problems.push(`task ${i}: a request carried task id ${got.find((s) => s.task !== c!.taskId)!.task}`);
      if (got.length > 1) resent++;
    });
    // The attempts open at the kill were never answered to anyone: each must have been sent again.
    for (const s of interrupted) {
      if (spans.filter((x) => x.path === s.path).length < 2) problems.push(`${s.path} was open at the target when its dispatcher was killed, but never sent again`);
    }

    // The log: exactly one AttemptFinished per attempt, attempt 1, success.
    const byExe = await executionEvents(stack.nats, stack.orgId);
    for (const c of created) problems.push(...logProblems(c!.exeId, byExe.get(c!.exeId) ?? [], spans.filter((s) => s.exe === c!.exeId).length));
    const strays = [...byExe.keys()].filter((exe) => !created.some((c) => c!.exeId === exe));
    if (strays.length) problems.push(`events for executions never created: ${strays.join(', ')}`);

    // The API: success, attempt 1, one attempt row.
    let nextGet = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (nextGet < TASKS) {
        const c = created[nextGet++]!;
        const res = await stack.api('GET', `/executions/${c.exeId}`);
        const e = res.body?.data;
        if (res.status !== 200 || e.status !== 'success' || e.attempt !== 1 || e.attempts.length !== 1) {
          problems.push(`GET /executions/${c.exeId}: ${res.status} status ${e?.status} attempt ${e?.attempt} attempts ${e?.attempts?.length}`);
        }
      }
    }));

    const figures = `${TASKS} tasks; ${interrupted.length} requests open at the kill; ${resent} tasks sent more than once (${spans.length} requests in all); done ${doneAt - killedAt} ms after the kill; test ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    note(figures);
    t.diagnostic(figures);
    assert.ok(interrupted.length >= 1, 'the kill landed while attempts were open');
    assert.deepEqual(problems.slice(0, 50), [], `${problems.length} problems`);
    failed = false;
  } finally {
    if (failed) stack.dump(notes);
    await target.close();
    await stack.cleanup();
  }
});

test('lanes across a dispatcher crash: one request at a time per lane, in creation order, all succeed', { timeout: 120_000 }, async (t) => {
  const LANES = 3;
  const PER_LANE = 20;
  const DELAY_MS = 200;
  const t0 = Date.now();
  const stack = await startStack(t, 'crash-lanes');
  const notes: string[] = [];
  const note = (m: string) => {
    notes.push(`[+${((Date.now() - t0) / 1000).toFixed(2)}s] ${m}`);
    if (process.env.JETCRON_TEST_LOG) process.stderr.write(`${notes.at(-1)}\n`);
  };
  const spans: Span[] = [];
  const target = await startTarget((req) => {
    spans.push({ path: req.path, at: req.at, end: req.at + DELAY_MS, exe: String(req.headers['x-jetcron-execution-id']), task: String(req.headers['x-jetcron-task-id']) });
    return { status: 200, body: 'ok', delayMs: DELAY_MS };
  });
  const laneOf = (p: string) => Number(p.split('/')[2]);
  const indexOf = (p: string) => Number(p.split('/')[3]);
  let failed = true;
  try {
    const first = await stack.spawnDispatcher('dispatcher-1');
    note(`dispatcher-1 spawned (pid ${first.pid})`);
    for (let l = 0; l < LANES; l++) {
      const res = await stack.api('POST', '/tasks/batch', {
        lane: `lane-${l}`,
        tasks: Array.from({ length: PER_LANE }, (_, i) => ({ url: `${target.url}/lane/${l}/${i}`, name: `lane-${l}-${i}` })),
      });
      assert.equal(res.status, 201, `batch of lane-${l}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.data.created, PER_LANE);
    }
    note('3 batches created');

    // Kill while a lane's request is open (and stays open past the kill), a good way into the run.
    await eventually(async () => {
      const now = Date.now();
      return new Set(spans.map((s) => s.path)).size >= 12 && spans.some((s) => s.end > now + 60);
    }, 60_000, 5).catch((err: Error) => assert.fail(`the lanes did not get going (${spans.length} requests): ${err.message}`));
    process.kill(first.pid, 'SIGKILL');
    const killedAt = Date.now();
    const interrupted = spans.filter((s) => s.end > killedAt);
    const arrivedBefore = new Set(spans.map((s) => s.path)).size;
    note(`SIGKILL dispatcher-1: open at the target ${interrupted.map((s) => s.path).join(', ')}; ${arrivedBefore} tasks had arrived`);
    assert.ok(arrivedBefore < LANES * PER_LANE, 'the kill came after the run had ended');
    await first.kill9();
    const second = await stack.spawnDispatcher('dispatcher-2');
    note(`dispatcher-2 spawned (pid ${second.pid})`);

    let counts: Record<string, number> = {};
    await eventually(async () => {
      counts = await stack.statusCounts();
      return new Set(spans.map((s) => s.path)).size === LANES * PER_LANE && counts.success === LANES * PER_LANE && (await stack.dispatchIdle());
    }, ACK_WAIT_MS + DRAIN_MARGIN_MS - (Date.now() - killedAt), 250).catch((err: Error) =>
      assert.fail(`not done ${Date.now() - killedAt} ms after the kill: statuses ${JSON.stringify(counts)}, ${new Set(spans.map((s) => s.path)).size} of ${LANES * PER_LANE} tasks arrived (${err.message})`));
    const doneAt = Date.now();
    await sleep(500);

    const problems: string[] = [];
    // The tasks as the API lists them: name → execution id.
    const listed = await stack.api('GET', '/tasks');
    assert.equal(listed.status, 200);
    const exeByName = new Map<string, string>(listed.body.data.map((x: { name: string; last_execution_id: string }) => [x.name, x.last_execution_id]));
    assert.equal(exeByName.size, LANES * PER_LANE, 'every task is listed');
    for (let l = 0; l < LANES; l++) {
      const lane = spans.filter((s) => s.path.startsWith(`/lane/${l}/`)).sort((a, b) => a.at - b.at);
      // One at a time: a request starts only once every earlier request of the lane was answered.
      for (let i = 0; i < lane.length; i++) {
        for (let j = 0; j < i; j++) {
          if (lane[i]!.at < lane[j]!.end) problems.push(`lane-${l}: ${lane[i]!.path} started at +${lane[i]!.at - t0} ms while ${lane[j]!.path} (from +${lane[j]!.at - t0} ms) was not yet answered (until +${lane[j]!.end - t0} ms)`);
        }
      }
      // Creation order, first arrivals: 0, 1, 2, …
      const firsts = [...new Set(lane.map((s) => indexOf(s.path)))];
      if (firsts.join(',') !== Array.from({ length: PER_LANE }, (_, i) => i).join(',')) problems.push(`lane-${l}: first arrivals in the order ${firsts.join(',')}`);
      // Never back: once a task of the lane was sent, no earlier task is sent again (the next starts after the current one ended for good).
      for (let i = 1; i < lane.length; i++) {
        if (indexOf(lane[i]!.path) < indexOf(lane[i - 1]!.path)) problems.push(`lane-${l}: ${lane[i]!.path} sent again after ${lane[i - 1]!.path} had started`);
      }
      // All succeeded, each under its one execution id.
      for (let i = 0; i < PER_LANE; i++) {
        const name = `lane-${l}-${i}`;
        const exe = exeByName.get(name);
        const got = lane.filter((s) => s.path === `/lane/${l}/${i}`);
        const ids = new Set(got.map((s) => s.exe));
        if (!exe || ids.size !== 1 || !ids.has(exe)) problems.push(`${name}: the target saw execution ids [${[...ids].join(', ')}], the API lists ${exe}`);
        if (!exe) continue;
        const res = await stack.api('GET', `/executions/${exe}`);
        if (res.status !== 200 || res.body.data.status !== 'success' || res.body.data.attempt !== 1) problems.push(`${name}: GET /executions/${exe} ${res.status} ${res.body?.data?.status} attempt ${res.body?.data?.attempt}`);
      }
    }
    for (const s of interrupted) {
      if (spans.filter((x) => x.path === s.path).length < 2) problems.push(`${s.path} was open at the target when its dispatcher was killed, but never sent again`);
    }
    const byExe = await executionEvents(stack.nats, stack.orgId);
    for (const exe of exeByName.values()) problems.push(...logProblems(exe, byExe.get(exe) ?? [], spans.filter((s) => s.exe === exe).length));

    const repeats = [...new Set(spans.map((s) => s.path))].filter((p) => spans.filter((s) => s.path === p).length > 1);
    const figures = `${LANES}×${PER_LANE} lane tasks; open at the kill: ${interrupted.map((s) => s.path).join(', ')}; sent more than once: ${repeats.join(', ') || 'none'}; done ${doneAt - killedAt} ms after the kill; test ${((Date.now() - t0) / 1000).toFixed(1)} s`;
    note(figures);
    t.diagnostic(figures);
    assert.ok(interrupted.length >= 1, 'the kill landed while a lane request was open');
    assert.deepEqual(problems.slice(0, 50), [], `${problems.length} problems`);
    assert.equal(new Set(spans.map((s) => laneOf(s.path))).size, LANES);
    failed = false;
  } finally {
    if (failed) stack.dump(notes);
    await target.close();
    await stack.cleanup();
  }
});
