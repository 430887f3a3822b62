/**
 * Issue 10: leases fail over in seconds. Process A (a child `jetcron serve`) starts
 * first and takes every single-owner lease (projector, the task partition owners
 * owner.0 and owner.1, notifier, inbound-router); process B (in-process serve(), same NATS and Postgres)
 * waits on standby. Then kill -9 of A. Measures, per role, how long after the kill B
 * holds the lease and its work runs again (a task created through B reaches its
 * target, a delayed one fires, an inbound request is forwarded, the projector writes
 * the new rows), and checks that the work A had accepted before it died all runs,
 * under one execution id per task.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Kvm, type KV } from '@nats-io/kv';
import pg from 'pg';
import { createApiKey } from '../src/commands/api-key/handlers.ts';
import { changePlan, createOrganization } from '../src/commands/organization/handlers.ts';
import { loadConfig } from '../src/config.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { createClock } from '../src/lib/clock.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { dieWithParent } from '../src/runtime/die-with-parent.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { onChildLines } from './support/child-lines.ts';
import { startTestNats } from './support/nats.ts';
import { createTestDatabase } from './support/postgres.ts';
import { apiClient, eventually, type Api } from './support/service.ts';
import { startTarget, type ReceivedRequest } from './support/target.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PARTITIONS = 2;
const LEASES = ['projector', ...Array.from({ length: PARTITIONS }, (_, p) => `owner.${p}`), 'notifier', 'inbound-router'];
/** The leased readers that report in /healthz (the partition owners do not). */
const CONSUMER_LEASES = ['projector', 'notifier', 'inbound-router'];
/** The lease TTL is 10 s and a standby tries every 0.5 s: each lease must change hands within this. */
const LEASE_BOUND_MS = 12_000;
/**
 * Work of every kind must run again within this of the kill: the lease's 10 s, then room
 * for a busy machine to read back and catch up (the check is that nothing waits for a
 * later timeout, not how fast the catching up goes).
 */
const RESUME_BOUND_MS = 20_000;
/** How long after the kill the test waits for everything before it checks (JETCRON_ROLE_FAILOVER_DRAIN_MS changes it). */
const DRAIN_MS = Number(process.env.JETCRON_ROLE_FAILOVER_DRAIN_MS) || 25_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Created {
  label: string;
  org: number;
  taskId: string;
  exeId: string;
  dueAt: number;
  createdAt: number;
  delayed: boolean;
  beforeKill: boolean;
}

test('role failover: kill -9 of the process holding every lease; the standby takes each over within the TTL and loses nothing', { timeout: 55_000 + DRAIN_MS }, async (t) => {
  const t0 = Date.now();
  const since = (at: number) => `+${((at - t0) / 1000).toFixed(2)}s`;
  const lines: string[] = [];
  const note = (m: string) => {
    const line = `[role-failover ${since(Date.now())}] ${m}`;
    lines.push(line);
    if (process.env.JETCRON_TEST_LOG) process.stderr.write(`${line}\n`);
  };
  const logA: string[] = [];
  const logB: string[] = [];
  const showLogs = () => {
    process.stderr.write(`${lines.join('\n')}\n--- process A (child) ---\n${logA.join('\n')}\n--- process B (in-process) ---\n${logB.join('\n')}\n`);
  };

  let nats: { url: string; stop(): Promise<void> } | undefined;
  let db: { url: string; drop(): Promise<void> } | undefined;
  let admin: Nats | undefined;
  let child: ChildProcess | undefined;
  let childExited: Promise<unknown> | undefined;
  let b: Running | undefined;
  let pgClient: pg.Client | undefined;
  let target: Awaited<ReturnType<typeof startTarget>> | undefined;
  const dirs: string[] = [];
  let polling = false;
  let failed = true;
  try {
    [nats, db] = await Promise.all([startTestNats(), createTestDatabase()]);
    target = await startTarget(() => ({ status: 200, body: 'ok' }));
    const tg = target;
    // Both processes: the same NATS, database and settings.
    const shared = { NATS_URL: nats.url, DATABASE_URL: db.url };
    const serviceEnv = () => ({
      ...shared, PORT: '0', HOST: '127.0.0.1', JETCRON_ALLOW_PRIVATE_TARGETS: '1',
      JETCRON_RATE_LIMIT_FREE: '0', JETCRON_RATE_LIMIT_PRO: '0', JETCRON_PARTITIONS: String(PARTITIONS),
    });

    // ---- process A: the real service as a child, started first so it takes every lease ----
    const dataA = mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-failover-a-'));
    dirs.push(dataA);
    // Dies with the test (SIGKILL) if the test process itself dies; setpriv execs node, so the pid stays node's.
    // One process for every role (--processes 1): the lease holder whose kill -9 this test is about.
    const cmd = dieWithParent(process.execPath, [path.join(ROOT, 'bin/jetcron.mjs'), 'serve', '--processes', '1', '--data-dir', dataA], 'SIGKILL');
    child = spawn(cmd.file, cmd.args, {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...serviceEnv() },
    });
    const a = child;
    childExited = new Promise((r) => a.once('exit', r));
    let urlA: string | undefined;
    onChildLines(a, (l) => {
      logA.push(`${since(Date.now())} ${l}`);
      urlA ??= /jetcron API listening on (http:\/\/\S+)\/api\/v1/.exec(l)?.[1];
    });
    const pidA = a.pid!;
    a.once('exit', (code, signal) => note(`process A (pid ${pidA}) exited: ${signal ?? code}`));
    await eventually(async () => {
      if (a.exitCode !== null || a.signalCode !== null) throw new Error(`process A exited (${a.signalCode ?? a.exitCode}) before it listened`);
      return urlA;
    }, 30_000, 50);
    note(`process A (pid ${pidA}) listening at ${urlA}`);

    admin = await connectNats(nats.url, 'role failover test admin');
    const leases: KV = await new Kvm(admin.nc).open('leases');
    const holders = async () => {
      const out: Record<string, string | null> = {};
      await Promise.all(LEASES.map(async (k) => {
        const e = await leases.get(k);
        out[k] = e && e.operation === 'PUT' ? e.string() : null;
      }));
      return out;
    };
    const ownerA = `${pidA}-`;
    const ownerB = `${process.pid}-`;
    await eventually(async () => Object.values(await holders()).every((v) => v?.startsWith(ownerA)), 20_000, 100)
      .catch(async (err: Error) => assert.fail(`process A does not hold every lease: ${JSON.stringify(await holders())} (${err.message})`));
    note(`process A holds every lease: ${JSON.stringify(await holders())}`);

    // ---- two organizations (their tasks spread over the partitions by task id) ----
    const orgs: Array<{ orgId: string; apiKey: string; viaA: Api; viaB: Api }> = [];
    {
      const deps = { store: createEventStore(admin), clock: createClock(1) };
      for (let i = 0; i < 2; i++) {
        const org = await createOrganization(deps, `failover-${i}`, 'free');
        const orgId = org.state!.id;
        await changePlan(deps, orgId, 'pro');
        const apiKey = (await createApiKey(deps, orgId)).apiKey;
        orgs.push({ orgId, apiKey, viaA: apiClient(() => urlA!, apiKey), viaB: apiClient(() => b!.url!, apiKey) });
      }
    }

    // ---- process B: in-process, same NATS and Postgres; every lease is A's, so it waits on standby ----
    const dataB = mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-failover-b-'));
    dirs.push(dataB);
    const configB = loadConfig(serviceEnv(), { dataDir: dataB });
    b = await serve(configB, (m) => {
      logB.push(`${since(Date.now())} ${m}`);
      if (process.env.JETCRON_TEST_LOG) process.stderr.write(`[B ${since(Date.now())}] ${m}\n`);
    });
    const urlB = b.url!;
    const healthB = async () => (await (await fetch(`${urlB}/healthz`, { signal: AbortSignal.timeout(5000) })).json()) as { consumers: Record<string, { state: string; lag?: number }> };
    const leasedConsumers = (h: Awaited<ReturnType<typeof healthB>>) => Object.fromEntries(Object.entries(h.consumers).filter(([name]) => name !== 'dispatchers' && name !== 'notifiers'));
    // While A holds the leases none of B's leased consumers runs: each is reported `standby`, or not
    // listed at all (B's supervisor learns of a consumer when it first runs it).
    await sleep(1000);
    const standby = leasedConsumers(await healthB());
    note(`process B listening at ${urlB}; its leased consumers in /healthz: ${JSON.stringify(standby)}`);
    assert.ok(Object.values(standby).every((x) => x.state === 'standby'), `B runs a leased consumer while A holds every lease: ${JSON.stringify(standby)}`);
    assert.ok(Object.values(await holders()).every((v) => v?.startsWith(ownerA)), 'B took a lease while A held it');

    // ---- work before the kill, through A: a warm-up, then tasks pending when A dies ----
    const arrivalsFor = (p: string): ReceivedRequest[] => tg.received.filter((r) => r.path === p);
    const created: Created[] = [];
    const createTask = async (via: 'A' | 'B', org: number, label: string, delay?: string) => {
      const api = via === 'A' ? orgs[org]!.viaA : orgs[org]!.viaB;
      const at = Date.now();
      const res = await api('POST', '/tasks', { url: `${tg.url}/t/${label}`, name: label, ...(delay ? { delay } : {}) });
      assert.equal(res.status, 201, `create ${label} through ${via}: ${res.status} ${JSON.stringify(res.body)}`);
      const c: Created = {
        label, org, taskId: res.body.data.id, exeId: res.body.data.last_execution_id, dueAt: Date.parse(res.body.data.next_run_at),
        createdAt: at, delayed: !!delay, beforeKill: via === 'A',
      };
      created.push(c);
      return { ...c, answeredAt: Date.now() };
    };
    await createTask('A', 0, 'warmup');
    await eventually(async () => arrivalsFor('/t/warmup').length > 0, 10_000, 50);
    const endpoint = (await orgs[0]!.viaA('POST', '/endpoints', { name: 'failover', forward_urls: [`${tg.url}/fwd`] })).body.data;
    assert.ok(endpoint?.inbound_url, `endpoint: ${JSON.stringify(endpoint)}`);
    const inboundPath = new URL(endpoint.inbound_url).pathname;
    // The endpoint is routed by A before the kill.
    const warmIn = await fetch(`${urlA}${inboundPath}`, { method: 'POST', body: 'warm', signal: AbortSignal.timeout(10_000) });
    await warmIn.text();
    assert.equal(warmIn.status, 200);
    await eventually(async () => arrivalsFor('/fwd').length > 0, 10_000, 50);

    // ---- the kill comes right after A renewed its leases, so each key lives (nearly) its whole TTL: the slowest takeover ----
    const before = await holders();
    assert.ok(Object.values(before).every((v) => v?.startsWith(ownerA)), `A lost a lease before the kill: ${JSON.stringify(before)}`);
    const lastWrites = async () => Object.fromEntries(await Promise.all(LEASES.map(async (k) => {
      const e = await leases.get(k);
      return [k, { revision: e?.revision ?? 0, at: e?.created.getTime() ?? 0 }] as const;
    })));
    const seen = await lastWrites();
    await eventually(async () => (await leases.get('projector'))!.revision !== seen.projector!.revision, 30_000, 10);
    // Pending when A dies: immediate ones (some maybe not yet translated) and delayed ones due during and after the takeover.
    const pre: Array<[number, string, string | undefined]> = [];
    for (let o = 0; o < PARTITIONS; o++) {
      pre.push([o, `pre-now-${o}-a`, undefined], [o, `pre-now-${o}-b`, undefined]);
      for (const d of ['1s', '4s', '8s', '12s']) pre.push([o, `pre-${d}-${o}`, d]);
    }
    await Promise.all(pre.map(([o, label, d]) => createTask('A', o, label, d)));
    // Two more, not awaited: the kill lands while A handles them (stored or not, answered or not).
    const unanswered: Array<{ org: number; label: string; error: string; found?: Created }> = [];
    const racing = [0, 1].map((o) => createTask('A', o, `pre-race-${o}`).catch((err: Error) => void unanswered.push({ org: o, label: `pre-race-${o}`, error: err.message })));
    await sleep(5);

    const killedAt = Date.now();
    process.kill(pidA, 'SIGKILL');
    const renewed = await lastWrites();
    note(`SIGKILL process A (pid ${pidA}); leases: ${JSON.stringify(before)}; A's last write of each: ${LEASES.map((k) => `${k} ${killedAt - renewed[k]!.at} ms before`).join(', ')}`);
    await Promise.race([childExited, sleep(5000)]);
    await Promise.all(racing);

    // ---- poll who holds each lease ----
    const gone: Record<string, number> = {};
    const takenByB: Record<string, number> = {};
    const other: string[] = [];
    polling = true;
    const poller = (async () => {
      while (polling && Object.keys(takenByB).length < LEASES.length) {
        const h = await holders().catch(() => null);
        const now = Date.now();
        for (const [k, v] of Object.entries(h ?? {})) {
          if (!v?.startsWith(ownerA)) gone[k] ??= now;
          if (v?.startsWith(ownerB)) takenByB[k] ??= now;
          else if (v && !v.startsWith(ownerA)) other.push(`${k}=${v}`);
        }
        await sleep(50);
      }
    })();
    // When B's /healthz first reports each leased consumer running.
    const runningInB: Record<string, number> = {};
    const healthPoller = (async () => {
      while (polling) {
        const h = await healthB().catch(() => null);
        const now = Date.now();
        for (const [name, c] of Object.entries(leasedConsumers(h ?? { consumers: {} }))) if (c.state !== 'standby') runningInB[name] ??= now;
        await sleep(200);
      }
    })();

    // ---- work after the kill, through B: all at once (each create waits up to 5 s for the projector) ----
    const inboundAfterKill = (async () => {
      const res = await fetch(`${urlB}${inboundPath}`, { method: 'POST', body: 'after the kill', signal: AbortSignal.timeout(20_000) });
      await res.text();
      return { status: res.status, at: Date.now() };
    })();
    const viaB = await Promise.all([createTask('B', 0, 'post-now'), createTask('B', 0, 'post-2s-0', '2s'), createTask('B', 1, 'post-2s-1', '2s')]);
    const postNow = viaB[0];
    const inboundAnswer = await inboundAfterKill;
    assert.equal(inboundAnswer.status, 200, 'inbound request through B');
    note(`creates through B answered after ${viaB.map((c) => `${c.label} ${c.answeredAt - killedAt} ms`).join(', ')}; inbound request after ${inboundAnswer.at - killedAt} ms`);
    // The warm-up request was the first forward.
    const fwdBefore = 1;

    // ---- the projector: when B's read model has the new task and GET answers it ----
    pgClient = new pg.Client({ connectionString: db.url });
    await pgClient.connect();
    const pc = pgClient;
    const marks: Record<string, number> = {};
    const deadline = killedAt + DRAIN_MS;
    const statusOf = async (ids: string[]) => new Map((await pc.query<{ id: string; status: string }>('SELECT id, status FROM executions WHERE id = ANY($1)', [ids])).rows.map((r) => [r.id, r.status]));
    while (Date.now() < deadline) {
      const now = Date.now();
      // A create A stored but never answered (killed meanwhile) is a task too: it must run like the rest.
      for (const u of unanswered.filter((x) => !x.found)) {
        const row = (await pc.query<{ id: string; exe: string; scheduled_for: Date }>(
          `SELECT t.id, e.id AS exe, e.scheduled_for FROM tasks t JOIN executions e ON e.source_id = t.id WHERE t.org_id = $1 AND t.doc->>'name' = $2`,
          [orgs[u.org]!.orgId, u.label])).rows[0];
        if (!row) continue;
        u.found = { label: u.label, org: u.org, taskId: row.id, exeId: row.exe, dueAt: row.scheduled_for.getTime(), createdAt: killedAt, delayed: false, beforeKill: true };
        created.push(u.found);
      }
      if (!marks.projectedRow && (await pc.query('SELECT 1 FROM tasks WHERE id = $1', [postNow.taskId])).rowCount) marks.projectedRow = now;
      if (!marks.getAnswers && (await orgs[0]!.viaB('GET', `/tasks/${postNow.taskId}`)).status === 200) marks.getAnswers = now;
      const st = await statusOf(created.map((c) => c.exeId));
      if (!marks.postSuccess && st.get(postNow.exeId) === 'success') marks.postSuccess = now;
      const waitFor = created;
      const allArrived = waitFor.every((c) => arrivalsFor(`/t/${c.label}`).length > 0) && arrivalsFor('/fwd').length > fwdBefore;
      const allSuccess = waitFor.every((c) => st.get(c.exeId) === 'success');
      if (allArrived && allSuccess && Object.keys(takenByB).length === LEASES.length && CONSUMER_LEASES.every((k) => runningInB[k])) break;
      await sleep(100);
    }
    polling = false;
    await Promise.all([poller, healthPoller]);
    await sleep(300); // a duplicate send would show up here
    for (const u of unanswered) note(`create ${u.label} through A got no answer (${u.error}); stored: ${u.found ? `${u.found.taskId}/${u.found.exeId}` : 'no'}`);

    // ---- figures ----
    const ms = (at: number | undefined) => (at === undefined ? 'never' : `${at - killedAt} ms`);
    const first = (p: string) => arrivalsFor(p)[0]?.at;
    const rows: Array<[string, string, string]> = [];
    for (const k of LEASES) rows.push([`lease ${k}`, `A's last renewal ${renewed[k]!.at - killedAt} ms, expired ${ms(gone[k])} (${(gone[k] ?? NaN) - renewed[k]!.at} ms after it)`, `held by B ${ms(takenByB[k])}`]);
    const byLabel = new Map(created.map((c) => [c.label, c]));
    const post2s = ['post-2s-0', 'post-2s-1'].map((l) => byLabel.get(l)!);
    rows.push(['B /healthz', 'leased consumers reported running', Object.entries(runningInB).sort((x, y) => x[1] - y[1]).map(([n, at]) => `${n} ${ms(at)}`).join(', ') || 'none']);
    rows.push(['task owner', 'task created through B right after the kill', `reached the target ${ms(first('/t/post-now'))}`]);
    for (const c of post2s) rows.push([`task owner (org ${c.org})`, `task due 2 s after creation (${ms(c.dueAt)})`, `reached the target ${ms(first(`/t/${c.label}`))}, ${(first(`/t/${c.label}`) ?? Infinity) - c.dueAt} ms late`]);
    rows.push(['inbound-router', 'inbound request through B', `forwarded to the target ${ms(tg.received.filter((r) => r.path === '/fwd')[fwdBefore]?.at)}`]);
    rows.push(['projector', `new task's row in Postgres ${ms(marks.projectedRow)}`, `GET /tasks/:id 200 ${ms(marks.getAnswers)}, execution success in the read model ${ms(marks.postSuccess)}`]);
    const preDelayed = created.filter((c) => c.beforeKill && c.delayed);
    const lateness = preDelayed.map((c) => ({ c, late: (first(`/t/${c.label}`) ?? Infinity) - c.dueAt }));
    for (const { c, late } of lateness) rows.push([`task owner (org ${c.org}, before the kill)`, `${c.label} due ${ms(c.dueAt)}`, `ran ${ms(first(`/t/${c.label}`))}, ${late} ms late`]);
    const table = rows.map((r) => r.join(' | ')).join('\n');
    note(`measured from the kill:\n${table}`);
    for (const r of rows) t.diagnostic(r.join(' | '));

    // ---- checks ----
    const problems: string[] = [];
    if (other.length) problems.push(`a lease named neither A nor B: ${[...new Set(other)].join(', ')}`);
    for (const k of LEASES) {
      const took = takenByB[k] === undefined ? Infinity : takenByB[k]! - killedAt;
      if (!(took <= LEASE_BOUND_MS)) problems.push(`lease ${k}: B held it ${took} ms after the kill (bound ${LEASE_BOUND_MS} ms)`);
    }
    const resumed = (what: string, at: number | undefined) => {
      const after = at === undefined ? Infinity : at - killedAt;
      if (!(after <= RESUME_BOUND_MS)) problems.push(`${what}: ${after} ms after the kill (bound ${RESUME_BOUND_MS} ms)`);
    };
    resumed('task created through B reached the target', first('/t/post-now'));
    for (const c of post2s) resumed(`delayed task ${c.label} (org ${c.org}) reached the target`, first(`/t/${c.label}`));
    resumed('inbound request through B forwarded', tg.received.filter((r) => r.path === '/fwd')[fwdBefore]?.at);
    resumed('projector: new task row in Postgres', marks.projectedRow);
    resumed('projector: GET /tasks/:id through B answers', marks.getAnswers);
    for (const k of CONSUMER_LEASES) resumed(`B's /healthz reports consumer ${k} running`, runningInB[k]);


    // Nothing lost, nothing run twice under two ids, nothing early.
    const st = await statusOf(created.map((c) => c.exeId));
    for (const c of created) {
      const got = arrivalsFor(`/t/${c.label}`);
      const ids = new Set(got.map((r) => String(r.headers['x-jetcron-execution-id'])));
      if (got.length === 0) problems.push(`${c.label} (${c.beforeKill ? 'created through A before the kill' : 'created through B'}, due ${ms(c.dueAt)}) never reached the target`);
      else if (ids.size !== 1 || !ids.has(c.exeId)) problems.push(`${c.label}: the target saw execution ids [${[...ids].join(', ')}], expected only ${c.exeId}`);
      if (got.length > 1) note(`${c.label}: sent ${got.length} times under ${c.exeId} (at-least-once resend)`);
      if (got[0] && c.delayed && got[0].at < c.dueAt - 5) problems.push(`${c.label} ran ${c.dueAt - got[0].at} ms before it was due`);
      const bound = RESUME_BOUND_MS;
      if (got[0] && !(got[0].at - Math.max(c.dueAt, killedAt) <= bound)) problems.push(`${c.label} ran ${got[0].at - Math.max(c.dueAt, killedAt)} ms after max(due, kill) (bound ${bound} ms)`);
      if (st.get(c.exeId) !== 'success') problems.push(`${c.label}: execution ${c.exeId} is ${st.get(c.exeId) ?? 'missing'} in the read model, not success`);
    }
    const fwd = tg.received.filter((r) => r.path === '/fwd');
    if (fwd.length !== 2) problems.push(`the endpoint forwarded ${fwd.length} requests, expected 2 (one before, one after the kill)`);
    if (new Set(fwd.map((r) => String(r.headers['x-jetcron-execution-id']))).size !== fwd.length) problems.push('the endpoint forwarded one inbound request twice under the same execution id');
    const unknown = tg.received.filter((r) => r.path.startsWith('/t/') && !byLabel.has(r.path.slice(3)));
    if (unknown.length) problems.push(`the target got requests for tasks never created: ${unknown.map((r) => r.path).join(', ')}`);

    if (problems.length) {
      for (const p of problems) note(`PROBLEM: ${p}`);
      const holdersNow = await holders().catch((e: Error) => ({ error: e.message }));
      note(`leases now: ${JSON.stringify(holdersNow)}; B /healthz: ${JSON.stringify(await healthB().catch((e: Error) => e.message))}`);
    }
    assert.deepEqual(problems, []);
    failed = false;
  } finally {
    polling = false;
    if (failed) showLogs();
    const steps: Array<() => Promise<unknown> | unknown> = [
      async () => {
        if (child && child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await Promise.race([childExited, sleep(5000)]);
        }
      },
      () => b?.stop(),
      () => pgClient?.end(),
      () => admin?.close(),
      () => target?.close(),
      () => db?.drop(),
      () => nats?.stop(),
      () => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })),
    ];
    for (const step of steps) await Promise.resolve().then(step).catch((err: Error) => process.stderr.write(`cleanup: ${err.message}\n`));
    note(`done in ${Date.now() - t0} ms`);
  }
});
