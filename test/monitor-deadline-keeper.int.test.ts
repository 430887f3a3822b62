/**
 * Kill -9 and monitors, with real processes: the scheduler that keeps the monitors'
 * deadlines in memory (src/scheduler/monitor-deadline-keeper.ts) dies, and the one that
 * takes its lease over rebuilds them from the log, so an armed deadline still takes its
 * monitor down, once; an API process dies right after answering a ping 200, and the
 * ping is in the log and the read model all the same.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../streams/definitions.ts';
import { monitorSubject } from '../src/commands/monitor/handlers.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { KEEPER } from '../src/scheduler/monitor-deadline-keeper.ts';
import { spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';

// interval 60 s → 3 s.
const SCALE = '0.05';
/** The keeper is the path without monitor partition owners (the owners' kills: monitor-owner-processes.int). */
const KEEPER_PATH = { JETCRON_MONITOR_OWNERS: '0' };
let svc: TestService;
let api: Api;
let orgId: string;
let nats: Nats;
const procs: JetcronProcess[] = [];
const spawn = async (roles: string, label: string) => {
  const p = await spawnJetcron({ roles, natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label, env: { JETCRON_TIME_SCALE: SCALE, ...KEEPER_PATH } });
  procs.push(p);
  return p;
};

before(async () => {
  // No scheduler here: the keeper runs only in the child processes the tests kill.
  svc = await startTestService({ JETCRON_ROLES: 'api,projector,notifier', JETCRON_TIME_SCALE: SCALE, ...KEEPER_PATH });
  ({ api, orgId } = await svc.createOrg('pro'));
  nats = await connectNats(svc.natsUrl, 'keeper test');
});
after(async () => {
  for (const p of procs) await p.cleanup();
  await nats.close();
  await svc.stop();
});

const monitor = async (grace = 0) =>
  (await api('POST', '/monitors', { name: `m-${Math.random().toString(36).slice(2, 8)}`, schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: grace })).body.data;
const get = async (id: string) => (await api('GET', `/monitors/${id}`)).body.data;
const keeperHolder = async () => (await (await new Kvm(nats.nc).open(KV_BUCKETS.leases.name)).get(KEEPER))?.string() ?? '';
const subjectCount = async (subject: string) => (await nats.jsm.streams.info(STREAMS.events.name, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;

test('the scheduler keeping the deadlines is killed (-9): its successor rebuilds them from the log, and the monitor goes down once', async () => {
  const first = await spawn('scheduler', 'scheduler-a');
  await eventually(async () => (await keeperHolder()).startsWith(`${first.pid}-`), 20_000);
  const m = await monitor();
  assert.equal((await fetch(m.ping_url)).status, 200);
  await eventually(async () => (await get(m.id)).status === 'up');
  await first.kill9();

  // Its lease expires; the next scheduler reads the monitor's last event and keeps its deadline.
  const second = await spawn('scheduler', 'scheduler-b');
  await eventually(async () => (await get(m.id)).status === 'down', 40_000).catch((err: Error) => assert.fail(`${err.message}\n${[...first.lines, ...second.lines].join('\n')}`));
  assert.equal((await get(m.id)).down_reason, 'missed');
  // Created, pinged, went down: one going down, however many keepers saw the deadline.
  assert.equal(await subjectCount(monitorSubject(orgId, m.id)), 3);
  assert.ok((await keeperHolder()).startsWith(`${second.pid}-`));
});

test('an API process killed (-9) right after answering a ping 200 loses no ping', async () => {
  const apiProcess = await spawn('api', 'api-a');
  // A run's limit is its grace here (an hour, 3 min scaled): nothing takes it down meanwhile.
  const m = await monitor(3600);
  const res = await fetch(`${apiProcess.url}${new URL(m.ping_url).pathname}/start`, { method: 'POST', body: 'started' });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { monitor: m.name, status: 'new' });
  await apiProcess.kill9();
  // Stored before the answer: in the log, and projected by the projector of this process.
  assert.equal(await subjectCount(monitorSubject(orgId, m.id)), 2);
  await eventually(async () => (await api('GET', `/monitors/${m.id}/pings`)).body.data.length === 1);
  const [ping] = (await api('GET', `/monitors/${m.id}/pings`)).body.data;
  assert.equal(ping.kind, 'start');
  assert.equal(ping.body, 'started');
});
