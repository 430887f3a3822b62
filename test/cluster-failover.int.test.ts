/**
 * Issue 10: a 3-node JetStream cluster, R3 streams, the service against all three
 * nodes, a mixed load created through the API (with Idempotency-Key, retried like a
 * real client), then kill -9 of the EVENTS leader and later of the KV_leases leader,
 * each restarted ~5 s later. Checks that every acknowledged task runs and ends once,
 * under one execution id, that every tick of schedules ticking every second through
 * it runs once or is counted missed, that nothing crashes, and how long dispatch stalls.
 */
import assert from 'node:assert/strict';
import { eventsOf } from '../src/commands/commit.ts';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import pg from 'pg';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { startNatsCluster, type NatsCluster } from './support/nats-cluster.ts';
import { eventually, startTestService, type TestService } from './support/service.ts';
import { startTarget, type ReceivedRequest } from './support/target.ts';

// 1 service minute = 0.6 s: retries after 1.2 s and 2.7 s, host blocks of 0.3–3 s.
const SCALE = 0.01;
/**
 * How long after a kill dispatch must be running again, and a delayed task due meanwhile
 * must have run: 10 s, or 7 s after NATS has elected every new leader when the election
 * itself takes longer (5.3–9.3 s on 2.9; longer on a loaded machine). The issue aims at
 * 5 s after the kill, which no client can reach while the server needs more to elect.
 */
const RESUME_BOUND_MS = 10_000;
const AFTER_ELECTION_MS = 7_000;
/** How long a killed node stays down. */
const DOWN_MS = 5000;
const CREATES_PER_SECOND = 8;
const MAX_CREATES_IN_FLIGHT = 64;
/** A client gives up on one create after this long (then it is reported, not acknowledged). */
const CREATE_DEADLINE_MS = 45_000;
/**
 * The client's own timeout per request: shorter than the service's worst answer time
 * (a write waits up to 5 s for the projector), so some creates are abandoned while
 * they run and retried with the same Idempotency-Key, as impatient clients do.
 */
const CLIENT_TIMEOUT_MS = 3000;
/** How long, after the load, every acknowledged task has to end (JETCRON_FAILOVER_DRAIN_MS to wait longer when diagnosing). */
const DRAIN_MS = Number(process.env.JETCRON_FAILOVER_DRAIN_MS) || 30_000;
const HEALTH_STREAMS = ['EVENTS', 'NOTIFY', 'INBOUND', 'KV_leases', 'KV_checkpoints', 'KV_idempotency', 'KV_host-blocks'];
const FINAL = new Set(['success', 'failed', 'timeout', 'cancelled']);
/** Schedules ticking every second through the kills: each tick runs once, or once late, or is counted missed. */
const SCHEDULES = 4;

type Kind = 'immediate' | 'delayed' | 'retrying';
// 40% immediate, 40% delayed, 20% retrying (500, 500, 200).
const KINDS: Kind[] = ['immediate', 'delayed', 'immediate', 'delayed', 'retrying'];

interface Try {
  at: number;
  ms: number;
  status?: number;
  error?: string;
  retryAfter?: string | null;
  message?: string;
}
interface Planned {
  n: number;
  key: string;
  kind: Kind;
  body: string;
  firstTry: number;
  tries: Try[];
  acked?: { at: number; status: number; taskId: string; exeId: string; dueAt: number; replayed: boolean };
  gaveUp?: string;
}
interface Arrival {
  at: number;
  key: string;
  exe: string;
  task: string;
}
interface Phase {
  label: string;
  victim: string;
  placement: string;
  killedAt: number;
  restartedAt: number;
  /** How long nats-server took to elect new leaders for what the victim led: the floor under any resume time. */
  elections: string;
  /** When the last of the killed node's leaderships was taken over, ms after the kill. */
  electedMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('cluster failover: kill -9 of the EVENTS leader, then of the KV_leases leader, loses nothing and stalls briefly', { timeout: 140_000 + DRAIN_MS }, async (t) => {
  const t0 = Date.now();
  const since = (at: number) => `${((at - t0) / 1000).toFixed(1)}s`;
  const note = (m: string) => process.stderr.write(`[failover +${since(Date.now())}] ${m}\n`);
  const serviceLog: string[] = [];
  const crashes: string[] = [];
  const onRejection = (err: unknown) => crashes.push(`unhandledRejection at +${since(Date.now())}: ${(err as Error)?.stack ?? String(err)}`);
  const onException = (err: unknown) => crashes.push(`uncaughtException at +${since(Date.now())}: ${(err as Error)?.stack ?? String(err)}`);
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);

  let cluster: NatsCluster | undefined;
  let svc: TestService | undefined;
  let admin: Nats | undefined;
  const targets: Array<{ close(): Promise<void> }> = [];
  // Background loops (the client's load, the /healthz sampler) run while these hold; cleared on any exit.
  let loadOn = false;
  let sampling = false;
  let ended = false;
  try {
    cluster = await startNatsCluster({ log: process.env.JETCRON_TEST_LOG ? (l) => /\[(ERR|WRN|FTL)\]/.test(l) && process.stderr.write(`${l}\n`) : undefined });
    const c = cluster;
    const name = (i: number) => c.nodes[i]!.name;
    note(`cluster up: ${c.urls}`);

    const good = await startTarget(() => ({ status: 200, body: 'ok' }));
    targets.push(good);
    // Another port, so another host: the flaky target's failure blocks never touch the good tasks.
    const seen = new Map<string, number>();
    const flaky = await startTarget((req) => {
      const n = (seen.get(req.path) ?? 0) + 1;
      seen.set(req.path, n);
      return { status: n <= 2 ? 500 : 200, body: n <= 2 ? 'not yet' : 'ok' };
    });
    targets.push(flaky);

    svc = await startTestService(
      { JETCRON_STREAM_REPLICAS: '3', JETCRON_TIME_SCALE: String(SCALE), JETCRON_ALLOW_PRIVATE_TARGETS: '1' },
      {
        natsUrl: c.urls,
        log: (m) => {
          const line = `+${since(Date.now())} ${m}`;
          serviceLog.push(line);
          if (process.env.JETCRON_TEST_LOG) process.stderr.write(`[svc] ${line}\n`);
        },
      },
    );
    const service = svc;
    const { orgId, apiKey } = await service.createOrg('pro');
    admin = await connectNats(c.urls, 'failover test admin');
    const leases = await new Kvm(admin.nc).open('leases');
    note(`service up at ${service.url}, org ${orgId}`);

    const serviceNode = async () => c.clientNode('jetcron ');
    const placement = async () => {
      const parts = [`service on ${(await serviceNode().then((i) => (i === undefined ? '?' : name(i))))}`];
      for (const s of ['EVENTS', 'NOTIFY', 'KV_leases', 'KV_idempotency', 'KV_checkpoints']) {
        parts.push(`${s} ${await c.leaderOf(s, 10_000).then(name, () => '?')}`);
      }
      return parts.join(', ');
    };
    // Every lease is held when each key was written (created or renewed, every 5 s)
    // within the last 7 s: a lease dropped after a failed renewal sits unrenewed until its 15 s TTL.
    const leasesFresh = async () => {
      const keys: string[] = [];
      for await (const k of await leases.keys()) keys.push(k);
      if (!keys.includes('notifier') || !keys.some((k) => k.startsWith('owner.'))) return false;
      for (const k of keys) {
        const e = await leases.get(k);
        if (!e || e.operation !== 'PUT' || Date.now() - e.created.getTime() > 7000) return false;
      }
      return true;
    };

    // ---- the client: creates with Idempotency-Key, retried on 503 / 5xx / 409 / network errors ----
    const planned: Planned[] = [];
    const runId = randomBytes(4).toString('hex');
    const create = async (p: Planned): Promise<void> => {
      for (;;) {
        const at = Date.now();
        const tr: Try = { at, ms: 0 };
        p.tries.push(tr);
        try {
          const res = await fetch(`${service.url}/api/v1/tasks`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': p.key },
            body: p.body,
            signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
          });
          const text = await res.text();
          tr.ms = Date.now() - at;
          tr.status = res.status;
          tr.retryAfter = res.headers.get('retry-after');
          if (res.status === 200 || res.status === 201) {
            const data = JSON.parse(text).data;
            p.acked = {
              at: Date.now(), status: res.status, taskId: data.id, exeId: data.last_execution_id,
              dueAt: Date.parse(data.next_run_at), replayed: res.headers.get('idempotent-replayed') === 'true',
            };
            return;
          }
          tr.message = text.slice(0, 300);
          if (res.status < 500 && res.status !== 409 && res.status !== 429) {
            p.gaveUp = `HTTP ${res.status} ${tr.message}`;
            return;
          }
        } catch (err) {
          tr.ms = Date.now() - at;
          tr.error = `${(err as Error).name}: ${(err as Error).message}`;
        }
        if (ended) return;
        if (Date.now() - p.firstTry > CREATE_DEADLINE_MS) {
          p.gaveUp = `no 2xx within ${CREATE_DEADLINE_MS} ms (${p.tries.length} tries)`;
          return;
        }
        // Retry-After when given; a 409 (the first request still runs) comes without one.
        const ra = Number(tr.retryAfter);
        await sleep(Number.isFinite(ra) && ra > 0 ? Math.min(ra * 1000, 2000) : tr.status === 409 ? 1000 : 300);
      }
    };

    // ---- schedules ticking every second through both kills (issue 35) ----
    const ticks = await startTarget(() => ({ status: 200, body: 'ok' }));
    targets.push(ticks);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${service.url}/api/v1${path}`, { method, headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
      return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
    };
    const schedules: Array<{ id: string; firstTick: number }> = [];
    for (let i = 0; i < SCHEDULES; i++) {
      const r = await call('POST', '/schedules', { url: `${ticks.url}/s/${i}`, cron: '* * * * * *', retry_attempts: 0, name: `every-second-${i}` });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      schedules.push({ id: r.body.data.id as string, firstTick: Date.parse(r.body.data.next_run_at as string) });
    }

    const inFlight = new Set<Promise<void>>();
    const startLoad = async () => {
      loadOn = true;
      for (let n = 0; loadOn; n++) {
        while (inFlight.size >= MAX_CREATES_IN_FLIGHT) await Promise.race(inFlight);
        const kind = KINDS[n % KINDS.length]!;
        const key = `${runId}-${n}-${kind}`;
        const spec: Record<string, unknown> = { url: `${kind === 'retrying' ? flaky.url : good.url}/t/${key}`, name: key, method: 'POST', body: { n } };
        // Due 1–6 s after creation: some come due while a node is down.
        if (kind === 'delayed') spec.delay = `${Math.round((1 + Math.random() * 5) / SCALE)}s`;
        const p: Planned = { n, key, kind, body: JSON.stringify(spec), firstTry: Date.now(), tries: [] };
        planned.push(p);
        const run = create(p).finally(() => inFlight.delete(run));
        inFlight.add(run);
        await sleep(1000 / CREATES_PER_SECOND);
      }
    };

    const arrivals = (): Arrival[] => [...good.received, ...flaky.received]
      .map((r: ReceivedRequest) => ({
        at: r.at,
        key: r.path.replace(/^\/t\//, ''),
        exe: String(r.headers['x-jetcron-execution-id']),
        task: String(r.headers['x-jetcron-task-id']),
      }))
      .sort((a, b) => a.at - b.at);
    const byKey = new Map<string, Planned>();
    const plannedOf = (key: string) => {
      if (byKey.size !== planned.length) for (const p of planned) byKey.set(p.key, p);
      return byKey.get(key);
    };
    // Dispatch resumed: the first request to reach a target for a task the client
    // started creating after the kill, so the whole path (API, EVENTS, the partition owners)
    // works again.
    const firstNewArrival = (after: number) => arrivals().find((a) => {
      const p = plannedOf(a.key);
      return p && p.kind !== 'delayed' && p.firstTry >= after;
    });

    // ---- before the load: put the EVENTS leader on the node the service talks to, the leases elsewhere ----
    // Wrapped: node 0 is falsy to `eventually`.
    const s1 = (await eventually(async () => serviceNode().then((i) => (i === undefined ? undefined : { i })), 10_000)).i;
    if (!(await c.moveLeader('EVENTS', (n) => n === s1))) note(`could not move the EVENTS leader to ${name(s1)}`);
    if (!(await c.moveLeader('KV_leases', (n) => n !== s1))) note(`could not move the KV_leases leader off ${name(s1)}`);
    await c.waitHealthy(HEALTH_STREAMS, 30_000);
    // Stepdowns may have cost leases: start only once every one is held again.
    await eventually(leasesFresh, 30_000, 250).catch(() => note('leases not all fresh before the load'));

    // The service's own view, sampled: which consumer was behind or stuck, and when.
    const healthTimeline: string[] = [];
    sampling = true;
    const sampler = (async () => {
      let last = '';
      while (sampling) {
        const started = Date.now();
        const summary = await fetch(`${service.url}/healthz`, { signal: AbortSignal.timeout(5000) })
          .then(async (r) => healthSummary(await r.json()), (e: Error) => `no answer (${e.name})`);
        if (summary !== last) healthTimeline.push(`+${since(started)} ${summary || 'all consumers ok'}`);
        last = summary;
        await sleep(Math.max(0, 1000 - (Date.now() - started)));
      }
    })();
    const generator = startLoad();
    const phases: Phase[] = [];
    const killPhase = async (label: string, victim: number) => {
      const where = await placement();
      const led: Array<[string, () => Promise<number>]> = [];
      for (const s of ['EVENTS', 'KV_leases']) {
        if ((await c.leaderOf(s, 5000).catch(() => -1)) === victim) led.push([s, () => c.leaderOf(s, 30_000)]);
      }
      note(`${label}: kill -9 ${name(victim)} (${where})`);
      const killedAt = Date.now();
      await c.kill(victim);
      // leaderOf answers only with a running node: the time it takes is the election.
      let electedMs = 0;
      const elections = Promise.all(led.map(([what, leader]) => leader().then(() => {
        electedMs = Math.max(electedMs, Date.now() - killedAt);
        return `${what} ${Date.now() - killedAt} ms`;
      }, () => `${what} none within 30 s`)));
      await sleep(DOWN_MS); // the outage itself: the node stays down this long
      await c.restart(victim);
      const restartedAt = Date.now();
      note(`${label}: ${name(victim)} restarted after ${restartedAt - killedAt} ms`);
      phases.push({ label, victim: name(victim), placement: where, killedAt, restartedAt, elections: (await elections).join(', ') || 'none', electedMs });
      await eventually(async () => firstNewArrival(killedAt), 30_000, 100).catch(() => note(`${label}: no new task dispatched within 30 s of the kill`));
      note(`${label}: new work dispatched`);
      await c.waitHealthy(HEALTH_STREAMS, 30_000).catch((err: Error) => note(`${label}: ${err.message}`));
      note(`${label}: every stream's replicas current`);
      await eventually(leasesFresh, 30_000, 250).catch(() => note(`${label}: leases not all fresh 30 s after the restart`));
      note(`${label}: every lease held`);
      // The next kill waits for this one's overdue timers, so one phase's lateness is not
      // the sum of two outages (the EVENTS leader of the next phase may be the one killed).
      const dueDelivered = () => {
        const arrived = new Set(arrivals().map((a) => a.key));
        return planned.filter((p) => p.kind === 'delayed' && p.acked && p.acked.dueAt <= Date.now() - 500).every((p) => arrived.has(p.key));
      };
      await eventually(async () => dueDelivered(), 30_000, 100).catch(() => note(`${label}: delayed tasks still overdue 30 s after the restart`));
      note(`${label}: overdue timers fired`);
    };

    // Some work of every kind pending and flowing before the first kill.
    await eventually(async () => planned.filter((p) => p.acked).length >= 40 && arrivals().length >= 15, 30_000, 100);
    await killPhase('EVENTS leader', await c.leaderOf('EVENTS'));

    const l2 = await c.leasesLeader();
    // Kill the leases' leader alone: move EVENTS away from it if they share a node.
    if (!(await c.moveLeader('EVENTS', (n) => n !== l2))) note(`could not move the EVENTS leader off ${name(l2)}`);
    await c.waitHealthy(HEALTH_STREAMS, 30_000).catch((err: Error) => note(err.message));
    await eventually(leasesFresh, 30_000, 250).catch(() => note('leases not all fresh before the second kill'));
    await killPhase('KV_leases leader', await c.leasesLeader());

    // Work created after the last restart too, then let every create finish.
    const afterLast = Date.now();
    await eventually(async () => planned.some((p) => p.firstTry > afterLast && p.acked), 20_000).catch(() => {});
    await sleep(1500);
    note('stopping the load');
    loadOn = false;
    await generator;
    await Promise.all(inFlight);
    const acked = planned.filter((p) => p.acked);
    note(`load done: ${planned.length} creates, ${acked.length} acknowledged`);

    // ---- wait until every acknowledged task's execution has ended (read model) ----
    const db = new pg.Client({ connectionString: service.databaseUrl });
    await db.connect();
    type Row = { name: string; task_id: string; exe_id: string | null; status: string | null; attempt: number | null };
    const rows = async () => (await db.query<Row>(
      `SELECT t.doc->>'name' AS name, t.id AS task_id, e.id AS exe_id, e.status, e.attempt
         FROM tasks t LEFT JOIN executions e ON e.source_id = t.id WHERE t.org_id = $1`, [orgId])).rows;
    let finalRows: Row[] = [];
    try {
      await eventually(async () => {
        finalRows = await rows();
        const ended = new Set(finalRows.filter((r) => r.status && FINAL.has(r.status)).map((r) => r.name));
        return acked.every((p) => ended.has(p.key));
      }, DRAIN_MS, 500).catch(() => note(`not every acknowledged task ended within ${DRAIN_MS} ms`));
      finalRows = await rows();
    } finally {
      await db.end();
    }

    sampling = false;
    await sampler;
    note(`/healthz over the run (changes only: consumers with lag > 20, backlog > 50, overdue > 1 s, or not ok):\n  ${healthTimeline.join('\n  ')}`);

    // ---- the event log (the source of truth) for this organization ----
    // The organization's own subjects, and the partition owners' commits (events of many organizations each).
    const events = [...(await readAll(admin, 'EVENTS', `evt.${orgId}.>`)), ...(await readAll(admin, 'EVENTS', 'evt.partition.>'))]
      .flatMap(({ seq, event }) => eventsOf<{ type: string; id: string; org_id: string; data: unknown; at: string }>(event).map((e) => ({ seq, event: e })))
      .filter((e) => e.event.org_id === orgId)
      .sort((a, b) => a.seq - b.seq);
    const tasksByName = new Map<string, Array<{ id: string; exe: string; seq: number }>>();
    const exeEvents = new Map<string, Array<{ type: string; seq: number; attempt?: number; status?: string; next?: string | null; at: string }>>();
    for (const { seq, event } of events) {
      const d = event.data as Record<string, any>;
      if (event.type === 'TaskCreated') {
        const list = tasksByName.get(d.task.name) ?? [];
        list.push({ id: d.task.id, exe: d.execution.id, seq });
        tasksByName.set(d.task.name, list);
      } else if (typeof d.execution_id === 'string') {
        const list = exeEvents.get(d.execution_id) ?? [];
        list.push({ type: event.type, seq, attempt: d.attempt, status: d.status, next: d.next_attempt_at && `+${since(Date.parse(d.next_attempt_at))}`, at: `+${since(Date.parse(event.at))}` });
        exeEvents.set(d.execution_id, list);
      }
    }

    // ---- checks, gathered so one run reports every failure ----
    const problems: string[] = [];
    const resends: string[] = [];
    const all = arrivals();

    // Every second from a schedule's first tick to its last recorded one is one tick that
    // ran (one execution id at the target, however often it was sent) or one counted in
    // missed_ticks: a tick run twice as two executions, or lost, breaks the sum.
    for (const [i, s] of schedules.entries()) {
      await call('PUT', `/schedules/${s.id}`, { enabled: false });
      const latest = (await call('GET', `/schedules/${s.id}/executions?limit=1`)).body.data as unknown as Array<{ id: string; scheduled_for: string }>;
      const last = latest[0]!;
      const sent = () => new Set(ticks.received.filter((r) => r.path === `/s/${i}`).map((r) => String(r.headers['x-jetcron-execution-id'])));
      await eventually(async () => sent().has(last.id), 30_000, 100).catch(() => note(`schedule ${i}: its last tick ${last.scheduled_for} not sent within 30 s`));
      const missed = ((await call('GET', `/schedules/${s.id}`)).body.data.missed_ticks as number | undefined) ?? 0;
      const ran = sent().size;
      const seconds = (Date.parse(last.scheduled_for) - s.firstTick) / 1000 + 1;
      const line = `schedule ${i}: ${seconds} ticks from ${new Date(s.firstTick).toISOString()} to ${last.scheduled_for}, ${ran} ran, ${missed} counted missed`;
      note(line);
      if (ran + missed !== seconds) problems.push(`${line}: ticks lost or run twice`);
    }
    const arrivalsOf = new Map<string, Arrival[]>();
    for (const a of all) arrivalsOf.set(a.key, [...(arrivalsOf.get(a.key) ?? []), a]);
    const describe = (p: Planned) => {
      const created = tasksByName.get(p.key) ?? [];
      const exes = created.map((x) => `${x.id}/${x.exe}@${x.seq}: ${JSON.stringify(exeEvents.get(x.exe) ?? [])}`).join('; ');
      const sent = (arrivalsOf.get(p.key) ?? []).map((a) => `${a.exe}@+${since(a.at)}`).join(', ');
      const tries = p.tries.map((tr) => `+${since(tr.at)} ${tr.status ?? tr.error}${tr.retryAfter ? ` RA=${tr.retryAfter}` : ''}`).join(' | ');
      return `${p.key} (${p.kind}, first try +${since(p.firstTry)}, acked ${p.acked ? `+${since(p.acked.at)} ${p.acked.taskId}/${p.acked.exeId}` : 'no'}) tries [${tries}] log [${exes}] target [${sent}]`;
    };

    for (const p of planned) {
      const created = tasksByName.get(p.key) ?? [];
      const sent = arrivalsOf.get(p.key) ?? [];
      if (!p.acked) {
        problems.push(`create never acknowledged (${p.gaveUp}): ${describe(p)}`);
        continue;
      }
      if (created.length !== 1) {
        problems.push(`${created.length} TaskCreated for one Idempotency-Key: ${describe(p)}`);
        continue;
      }
      const task = created[0]!;
      if (task.id !== p.acked.taskId || task.exe !== p.acked.exeId) problems.push(`acknowledged ${p.acked.taskId}/${p.acked.exeId} but the log has ${task.id}/${task.exe}: ${describe(p)}`);
      // The flaky target fails the first two requests, so success means the third send.
      // A send whose result could not be recorded (EVENTS unavailable) runs again as the
      // same attempt (the dispatcher's at-least-once), so the recorded attempt can be lower.
      const wantSends = p.kind === 'retrying' ? 3 : 1;
      const history = exeEvents.get(task.exe) ?? [];
      const ends = history.filter((e) => (e.type === 'AttemptFinished' && !e.next) || e.type === 'ExecutionCancelled');
      const end = ends.length === 1 && ends[0]!.status === 'success' ? ends[0]! : undefined;
      if (!end) problems.push(`execution did not end once in success: ${describe(p)}`);
      const row = finalRows.filter((r) => r.name === p.key);
      if (row.length !== 1 || row[0]!.exe_id !== task.exe || row[0]!.status !== 'success' || (end && row[0]!.attempt !== end.attempt)) {
        problems.push(`read model shows ${JSON.stringify(row)}: ${describe(p)}`);
      }
      const exeIds = new Set(sent.map((a) => a.exe));
      if (exeIds.size !== 1 || !exeIds.has(task.exe) || sent.some((a) => a.task !== task.id)) {
        problems.push(`target received ${sent.length} requests under execution ids [${[...exeIds].join(', ')}]: ${describe(p)}`);
      } else if (end && (sent.length !== wantSends || end.attempt !== wantSends)) {
        // At-least-once allows a resend under the same execution id; reported, not failed.
        const recorded = history.filter((e) => e.type === 'AttemptFinished').length;
        resends.push(`${sent.length} sends, ${recorded} recorded, ended at attempt ${end.attempt}: ${describe(p)}`);
      }
    }
    for (const [taskName, list] of tasksByName) {
      if (!plannedOf(taskName)) problems.push(`task ${taskName} (${list.map((x) => x.id).join(', ')}) was never asked for`);
    }
    const badAnswers = planned.flatMap((p) => p.tries.filter((tr) => tr.status !== undefined && tr.status >= 500 && (tr.status !== 503 || !tr.retryAfter)).map((tr) => ({ p, tr })));
    for (const { p, tr } of badAnswers.slice(0, 10)) problems.push(`create answered ${tr.status}${tr.retryAfter ? '' : ' without Retry-After'} at +${since(tr.at)} (${tr.message}): ${p.key}`);
    if (badAnswers.length > 10) problems.push(`… and ${badAnswers.length - 10} more such answers`);
    if (crashes.length) problems.push(...crashes);
    const alive = await fetch(`${service.url}/api/v1/tasks/${acked[0]?.acked?.taskId}`, { headers: { Authorization: `Bearer ${apiKey}` } }).then((r) => r.status, (e: Error) => e.message);
    if (alive !== 200) problems.push(`the service does not answer after the test: ${alive}`);

    // ---- how long dispatch stalled ----
    const figures: string[] = [];
    for (const [i, ph] of phases.entries()) {
      const windowEnd = Math.min(ph.killedAt + 20_000, phases[i + 1]?.killedAt ?? Infinity);
      const first = firstNewArrival(ph.killedAt);
      const resumeMs = first ? first.at - ph.killedAt : Infinity;
      // The API: the first 2xx to a create sent after the kill.
      const apiBack = planned.flatMap((p) => p.tries).filter((tr) => tr.at >= ph.killedAt && (tr.status === 201 || tr.status === 200)).map((tr) => tr.at + tr.ms).sort((a, b) => a - b)[0];
      // Timers: delayed tasks due after the kill (until 20 s or the next kill), how late their request came.
      const late = acked.filter((p) => p.kind === 'delayed' && p.acked!.dueAt >= ph.killedAt && p.acked!.dueAt < windowEnd)
        .map((p) => ({ p, ms: (arrivalsOf.get(p.key)?.[0]?.at ?? Infinity) - p.acked!.dueAt }));
      const worst = late.reduce((m, x) => (x.ms > m.ms ? x : m), { p: undefined as Planned | undefined, ms: -Infinity });
      // The longest silence at the targets in the 30 s after the kill.
      const window = all.filter((a) => a.at >= ph.killedAt - 2000 && a.at <= ph.killedAt + 30_000);
      let gap = 0;
      let gapAt = ph.killedAt;
      for (let i = 1; i < window.length; i++) {
        if (window[i]!.at - window[i - 1]!.at > gap) [gap, gapAt] = [window[i]!.at - window[i - 1]!.at, window[i - 1]!.at];
      }
      const sent503 = planned.flatMap((p) => p.tries).filter((tr) => tr.at >= ph.killedAt && tr.at < ph.killedAt + 30_000);
      const statuses = new Map<string, number>();
      for (const tr of sent503) statuses.set(String(tr.status ?? tr.error?.split(':')[0]), (statuses.get(String(tr.status ?? tr.error?.split(':')[0])) ?? 0) + 1);
      const line = `${ph.label} (${ph.victim} killed at +${since(ph.killedAt)}, restarted +${since(ph.restartedAt)}; ${ph.placement}): `
        + `NATS elected new leaders: ${ph.elections}; new work dispatched after ${resumeMs} ms; API answered 2xx again after ${apiBack ? apiBack - ph.killedAt : 'never'} ms; `
        + `delayed tasks due in the ${((windowEnd - ph.killedAt) / 1000).toFixed(0)} s after: ${late.length}, latest ${worst.ms} ms late${worst.p ? ` (${worst.p.key})` : ''}; `
        + `longest target silence ${gap} ms from +${since(gapAt)}; create answers in the 30 s after: ${JSON.stringify(Object.fromEntries(statuses))}`;
      figures.push(line);
      note(line);
      t.diagnostic(line);
      const bound = Math.max(RESUME_BOUND_MS, ph.electedMs + AFTER_ELECTION_MS);
      if (!(resumeMs <= bound)) problems.push(`${ph.label}: new work dispatched ${resumeMs} ms after the kill (bound ${bound} ms)`);
      if (late.length && !(worst.ms <= bound)) problems.push(`${ph.label}: delayed task ${worst.p?.key} ran ${worst.ms} ms after it was due (bound ${bound} ms): ${worst.p ? describe(worst.p) : ''}`);
    }
    // Idempotency: the longest a key kept answering 409 (its first request still in flight, or its record never settled).
    const busy = planned.map((p) => {
      let longest = 0;
      let from: number | undefined;
      for (const tr of p.tries) {
        if (tr.status === 409) from ??= tr.at;
        else if (from !== undefined) {
          longest = Math.max(longest, tr.at - from);
          from = undefined;
        }
      }
      return { p, longest };
    }).sort((a, b) => b.longest - a.longest);
    if (busy[0]?.longest) note(`longest run of 409 for one key: ${busy[0].longest} ms; e.g.\n  ${busy.slice(0, 3).map((b) => describe(b.p)).join('\n  ')}`);
    const metrics = await fetch(`${service.url}/metrics`).then((r) => r.text(), () => '');
    const idem = metrics.split('\n').filter((l) => /^jetcron_idempot/.test(l));
    if (idem.length) note(`idempotency metrics: ${idem.join('; ')}`);
    const counts = `${planned.length} creates (${KINDS.map((k) => `${k} ${planned.filter((p) => p.kind === k).length}`).filter((v, i, a) => a.indexOf(v) === i).join(', ')}), `
      + `${acked.length} acknowledged (${acked.filter((p) => p.acked!.replayed).length} replayed), ${all.length} target requests, ${planned.reduce((s, p) => s + p.tries.length - 1, 0)} client retries`;
    note(counts);
    t.diagnostic(counts);
    if (resends.length) note(`${resends.length} executions sent more often than recorded (same execution id; at-least-once), e.g.:\n  ${resends.slice(0, 5).join('\n  ')}`);
    if (problems.length) {
      // Grouped by kind, a few examples each: hundreds of tasks can fail the same way.
      const kinds = new Map<string, string[]>();
      for (const pr of problems) {
        const kind = pr.replace(/:.*$/s, '').replace(/\d+/g, 'N').slice(0, 120);
        kinds.set(kind, [...(kinds.get(kind) ?? []), pr]);
      }
      for (const [kind, list] of kinds) note(`PROBLEM x${list.length}: ${kind}\n  ${list.slice(0, 4).join('\n  ')}`);
      note(`service log (first lines, repeats folded):\n  ${foldLog(serviceLog).join('\n  ')}`);
    }
    assert.equal(problems.length, 0, `${problems.length} problems (listed above): ${[...new Set(problems.map((pr) => pr.replace(/:.*$/s, '').replace(/\d+/g, 'N')))].join('; ').slice(0, 1000)}`);
  } finally {
    loadOn = false;
    sampling = false;
    ended = true;
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
    // Each cleanup step runs even when an earlier one fails.
    const steps: Array<() => Promise<unknown> | undefined> = [
      () => admin?.close(),
      () => svc?.stop(),
      ...targets.map((tg) => () => tg.close()),
      () => cluster?.stop(),
    ];
    for (const step of steps) await Promise.resolve().then(step).catch((err: Error) => note(`cleanup: ${err.message}`));
  }
});

/** Every message of `stream` on `filter`, in order, decoded as event envelopes. */
async function readAll(nats: Nats, stream: string, filter: string): Promise<Array<{ seq: number; event: { type: string; data: unknown; at: string } }>> {
  const out: Array<{ seq: number; event: { type: string; data: unknown; at: string } }> = [];
  // A string: an array needs nats-server 2.10.
  const consumer = await nats.js.consumers.get(stream, { filter_subjects: filter });
  for (;;) {
    const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
    let got = 0;
    let pending = 1;
    for await (const m of batch) {
      got++;
      out.push({ seq: m.seq, event: m.json() });
      pending = m.info.pending;
    }
    if (got === 0 || pending === 0) return out;
  }
}

/** The consumers /healthz reports as not keeping up, in one line (empty when all keep up). */
function healthSummary(report: { status?: string; stores?: Record<string, string>; consumers?: Record<string, { state: string; lag?: number; backlog?: number; overdue_ms?: number; error?: string }> }): string {
  const parts: string[] = [];
  for (const [store, state] of Object.entries(report.stores ?? {})) if (state !== 'ok') parts.push(`${store} ${state}`);
  for (const [name, c] of Object.entries(report.consumers ?? {})) {
    const behind = (c.lag ?? 0) > 20 || (c.backlog ?? 0) > 50 || (c.overdue_ms ?? 0) > 1000;
    if (c.state === 'ok' && !behind) continue;
    if (c.state === 'standby') continue;
    const figures = [c.lag !== undefined && `lag ${c.lag}`, c.backlog !== undefined && `backlog ${c.backlog}`, c.overdue_ms !== undefined && `overdue ${Math.round(c.overdue_ms / 1000)} s`].filter(Boolean).join(' ');
    parts.push(`${name} ${c.state}${figures ? ` ${figures}` : ''}${c.error ? ` (${c.error.slice(0, 80)})` : ''}`);
  }
  return parts.join('; ');
}

/** Each entry's first line (no stacks), runs of the same message folded into one with a count. */
function foldLog(lines: string[]): string[] {
  const out: string[] = [];
  let last = '';
  let count = 0;
  const flush = () => {
    if (count > 1) out[out.length - 1] += ` (x${count})`;
  };
  for (const line of lines) {
    const first = line.split('\n')[0]!;
    const message = first.replace(/^\+[\d.]+s /, '').replace(/seq \d+|\d+ ms|try \d+/g, '#');
    if (message === last) {
      count++;
      continue;
    }
    flush();
    out.push(first);
    last = message;
    count = 1;
  }
  flush();
  return out;
}
