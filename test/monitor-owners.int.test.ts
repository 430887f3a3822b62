/**
 * Monitor partition owners (src/owners/monitor-owner.ts) against a real JetStream, the
 * owners and the asking API processes each on their own connection: two API processes
 * pinging one monitor, a pause racing pings, and a takeover that answers a request its
 * predecessor stored before it could answer (a kill -9 after the commit) from the log.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import type { CommandDeps } from '../src/commands/execute.ts';
import { createMonitor, monitorSubject, pingMonitor, runMonitor } from '../src/commands/monitor/handlers.ts';
import type { Monitor, MonitorEvent } from '../src/commands/monitor/types.ts';
import { monitorPartition } from '../src/commands/partition/partition-of.ts';
import { eventsOf } from '../src/commands/commit.ts';
import { createClock } from '../src/lib/clock.ts';
import { ApiError } from '../src/lib/errors.ts';
import { newId } from '../src/lib/ids.ts';
import type { Nats } from '../src/nats/connection.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { createMonitorOwnerClient } from '../src/owners/monitor-client.ts';
import { startMonitorOwners } from '../src/owners/monitor-owner.ts';
import type { MonitorReplies, MonitorRequest } from '../src/owners/monitor-wire.ts';
import { startNatsWithStreams } from './support/nats.ts';
import { readEvents } from './support/jetcron-process.ts';

const PARTITIONS = 4;
let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
const connections: Nats[] = [];
const stoppers: Array<() => Promise<void>> = [];
before(async () => {
  server = await startNatsWithStreams();
});
after(async () => {
  for (const s of stoppers.reverse()) await s();
  for (const c of connections) await c.close();
  await server.stop();
});

const connect = async (name: string) => {
  const nats = await server.connect(name);
  connections.push(nats);
  return { nats, store: createEventStore(nats), clock: createClock() };
};
/** A process holding monitor owners (the scheduler role's). */
const ownerProcess = async (name: string, restateAfter?: number) => {
  const c = await connect(name);
  const lines: string[] = [];
  const owners = startMonitorOwners({ ...c, owner: name, log: (m) => lines.push(m), partitions: PARTITIONS, ...(restateAfter ? { restateAfter } : {}) });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await owners.stop();
  };
  stoppers.push(stop);
  return { lines, stop, owners };
};
/** An API process: its monitor commands go to the owners. */
const apiProcess = async (name: string): Promise<CommandDeps & { nats: Nats }> => {
  const c = await connect(name);
  return { ...c, monitorOwners: createMonitorOwnerClient({ nats: c.nats, partitions: PARTITIONS }) };
};
const received = (rid: string | null = null, body = '') => ({ method: 'GET', source_ip: null, user_agent: null, body, rid });
const newMonitor = async (api: CommandDeps, name: string) => {
  const orgId = newId('org', Date.now());
  const { state } = await createMonitor(api, orgId, { name, schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 0 }, { name: 'pro', limit: null, live: [] }, async () => null);
  return { orgId, id: state!.id };
};
/** Every event of the monitor, wherever stored (its own subject, its partition's commits), in log order. */
const logOf = async (nats: Nats, orgId: string, id: string) => {
  const messages = [
    ...(await readEvents(nats, monitorSubject(orgId, id))),
    ...(await readEvents(nats, SUBJECTS.monitorPartition(monitorPartition(orgId, id, PARTITIONS)))),
  ].sort((a, b) => a.seq - b.seq);
  return messages.flatMap((m) => eventsOf<MonitorEvent>(m.event).filter((e) => (e.data as { monitor?: Monitor }).monitor?.id === id).map((event) => ({ seq: m.seq, subject: m.subject, event })));
};

test('two API processes ping one monitor through its owner: each ping decided on the state before it, every one stored once, pings in the partition\'s commits', async () => {
  await ownerProcess('owner a');
  const [a, b] = [await apiProcess('api a'), await apiProcess('api b')];
  const { orgId, id } = await newMonitor(a, 'two');
  const rid = '6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f';

  await pingMonitor(b, orgId, id, { ...received(rid), suffix: 'start' });
  const end = await pingMonitor(a, orgId, id, { ...received(rid), suffix: '0' });
  assert.notEqual((end.events[0] as Extract<MonitorEvent, { type: 'MonitorPinged' }>).data.ping.duration_ms, null, 'the end closed the start the other process asked for');
  assert.equal(end.state?.status, 'up');

  const both = await Promise.all(Array.from({ length: 40 }, (_, i) => pingMonitor(i % 2 ? a : b, orgId, id, { ...received(null, `p${i}`), suffix: null })));
  const log = await logOf(a.nats, orgId, id);
  const pings = log.filter((e) => e.event.type === 'MonitorPinged');
  assert.equal(pings.length, 42, 'start, end and 40 pings, each once');
  assert.equal(new Set(pings.map((e) => e.event.id)).size, 42);
  assert.ok(pings.every((e) => e.subject === SUBJECTS.monitorPartition(monitorPartition(orgId, id, PARTITIONS))), 'pings are in the partition\'s commits');
  for (const r of both) assert.ok(log.some((e) => e.seq === r.seq && e.event.id === r.events[0]!.id), 'each answer names where its ping is stored');
  assert.equal(log[0]!.event.type, 'MonitorCreated');
  assert.equal(log[0]!.subject, monitorSubject(orgId, id));
});

test('a pause racing pings of two API processes: pings decided before it are stored before it, every later one is a 410, and a new owner holds it paused', async () => {
  const first = await ownerProcess('owner b');
  const [a, b] = [await apiProcess('api c'), await apiProcess('api d')];
  const { orgId, id } = await newMonitor(a, 'race');
  await pingMonitor(a, orgId, id, { ...received(), suffix: null });

  const results = await Promise.allSettled([
    ...Array.from({ length: 10 }, (_, i) => pingMonitor(i % 2 ? a : b, orgId, id, { ...received(), suffix: null })),
    runMonitor(b, orgId, id, { type: 'PauseMonitor' }),
    ...Array.from({ length: 10 }, (_, i) => pingMonitor(i % 2 ? a : b, orgId, id, { ...received(), suffix: null })),
  ]);
  for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof ApiError && r.reason.status === 410, String(r.reason));
  const pause = results[10]!;
  assert.equal(pause.status, 'fulfilled');
  const pausedAt = (pause as PromiseFulfilledResult<{ seq: number }>).value.seq;
  const log = await logOf(a.nats, orgId, id);
  assert.equal(log.at(-1)!.event.type, 'MonitorPaused', 'nothing stored after the pause');
  assert.equal(log.at(-1)!.seq, pausedAt);
  assert.equal(log.filter((e) => e.event.type === 'MonitorPinged').length, 1 + results.filter((r, i) => i !== 10 && r.status === 'fulfilled').length);
  // Its last event on its own subject carries it paused, and its ping rows' state before it.
  assert.equal((log.at(-1)!.event.data.monitor as Monitor).last_ping_at !== null, true);

  // Another process's owners take over (the first stopped): they read it paused back from the log.
  await first.stop();
  await ownerProcess('owner c');
  await assert.rejects(pingMonitor(a, orgId, id, { ...received(), suffix: null }), (err: unknown) => err instanceof ApiError && err.status === 410);
  const resumed = await runMonitor(b, orgId, id, { type: 'ResumeMonitor' });
  assert.equal(resumed.state?.status, 'up');
  const again = await pingMonitor(a, orgId, id, { ...received(), suffix: null });
  assert.equal(again.state?.status, 'up');
});

test('a request stored by an owner that could not answer (stopped right after its commit) is answered from the log by the next owner, never recorded twice', async () => {
  const first = await ownerProcess('owner d');
  const api = await apiProcess('api e');
  const { orgId, id } = await newMonitor(api, 'retry');
  const partition = monitorPartition(orgId, id, PARTITIONS);
  const ask = async (items: MonitorRequest[]) =>
    (JSON.parse(new TextDecoder().decode((await api.nats.nc.request(SUBJECTS.monitorOwner(partition), JSON.stringify({ items }), { timeout: 10_000 })).data)) as MonitorReplies).answers;
  const now = Date.now();
  const request: MonitorRequest = {
    org_id: orgId, id, request_id: newId('evt', now),
    command: { type: 'Ping', ping: { ...received('0b1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f'), suffix: 'start', id: newId('png', now), received_at: new Date(now).toISOString() } },
  };
  const [stored] = await ask([request]);
  assert.ok(stored && 'seq' in stored && stored.events.length === 1, JSON.stringify(stored));
  // Asked again of the same owner (the answer lost on the way): the same answer.
  assert.deepEqual((await ask([request]))[0], stored);

  await first.stop();
  await ownerProcess('owner e');
  // The retry reaches the next owner, which read the commit back: the same event, the same place.
  const [retried] = await eventuallyAnswered(() => ask([request]));
  assert.deepEqual(retried, stored);
  // And it holds what the commit said: the run the start opened is closed by an end now.
  const end = await pingMonitor(api, orgId, id, { ...received('0b1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f'), suffix: '0' });
  assert.notEqual((end.events[0] as Extract<MonitorEvent, { type: 'MonitorPinged' }>).data.ping.duration_ms, null);
  const log = await logOf(api.nats, orgId, id);
  assert.equal(log.filter((e) => e.event.id === request.request_id).length, 1, 'recorded once');
});

test('the anchor: a monitor pinged once, then many commits of another monitor later, a takeover reads back only a bounded part of the partition\'s commits and holds the silent monitor as it was (status, deadline)', async () => {
  const RESTATE_AFTER = 40;
  // The owners of the tests before stop: these own every partition.
  for (const s of stoppers) await s();
  const first = await ownerProcess('owner f', RESTATE_AFTER);
  const api = await apiProcess('api f');
  const silent = await newMonitor(api, 'silent');
  const partition = monitorPartition(silent.orgId, silent.id, PARTITIONS);
  let busy = await newMonitor(api, 'busy');
  while (monitorPartition(busy.orgId, busy.id, PARTITIONS) !== partition) busy = await newMonitor(api, 'busy');
  const once = await pingMonitor(api, silent.orgId, silent.id, { ...received(), suffix: null });
  assert.equal(once.state?.status, 'up');
  const deadline = once.state!.deadline_at!;

  const PINGS = 600;
  for (let i = 0; i < PINGS; i += 3) {
    await Promise.all([0, 1, 2].map(() => pingMonitor(api, busy.orgId, busy.id, { ...received(), suffix: null })));
  }
  const log = await logOf(api.nats, silent.orgId, silent.id);
  const restated = log.filter((e) => e.event.type === 'MonitorRestated');
  assert.ok(restated.length >= 1, 'restated in the partition\'s commits');
  assert.equal(log.filter((e) => e.event.type === 'MonitorPinged').length, 1, 'never a ping it did not get');
  for (const r of restated) assert.deepEqual(r.event.data.monitor, once.state, 'the monitor as its ping left it');

  await first.stop();
  const next = await ownerProcess('owner g', RESTATE_AFTER);
  const liveLine = await eventuallyLine(next.lines, new RegExp(`partition ${partition}: live`));
  const events = Number(/\((\d+) events\)/.exec(liveLine)?.[1]);
  // The bound: RESTATE_AFTER (or twice the monitors held) commit events, and the commits of a turn.
  assert.ok(events < PINGS / 2, `read back ${events} events of the ${PINGS} pings since the silent monitor's: ${liveLine}`);
  assert.equal(next.owners.local(partition)?.deadlines.dueOf(silent.id), Date.parse(deadline), 'its deadline held');
  const logged = await pingMonitor(api, silent.orgId, silent.id, { ...received(), suffix: 'log' });
  assert.deepEqual({ ...logged.state, updated_at: null }, { ...once.state, updated_at: null }, 'held as its one ping left it');
  assert.equal(logged.state?.status, 'up');
});

async function eventuallyLine(lines: string[], pattern: RegExp): Promise<string> {
  for (let i = 0; i < 300; i++) {
    const line = lines.find((l) => pattern.test(l));
    if (line) return line;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no line ${pattern}: ${lines.join('\n')}`);
}

/** Asks until an owner answers other than "ask again" (a takeover under way). */
async function eventuallyAnswered<T extends { retry?: string } | object>(ask: () => Promise<T[]>): Promise<T[]> {
  for (let i = 0; ; i++) {
    try {
      const answers = await ask();
      if (answers.every((a) => !('retry' in a))) return answers;
    } catch (err) {
      if (i > 100) throw err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
