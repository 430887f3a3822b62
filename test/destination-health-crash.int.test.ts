// Destination health under kill -9 of the notifier, whose reader counts the final results
// (src/notifier/health.ts): killed after counting a failure, and again while the
// schedule.disabled notification is being sent, each time with its checkpoint put back
// before the results (the window between a reader's append and its checkpoint), the
// schedule is disabled once, on its third failure (no result counted twice), and the
// channel hears of it once. And a delivery its partition owner dies sending, sent again
// by the next owner, is one final result, counted once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { readEvents } from './support/jetcron-process.ts';
import { notifierIdle } from './support/positions.ts';
import { serviceWithOwnersApart } from './support/owner-processes.ts';
import { startWithSeparateNotifier, type SeparateNotifier } from './support/separate-notifier.ts';
import { eventually } from './support/service.ts';
import { startTarget } from './support/target.ts';

const FINAL = ['success', 'failed', 'timeout', 'cancelled'];

describe('destination health under kill -9 of the notifier', () => {
  // Every role but the notifier in the test's process; notifiers in processes of their own, to kill.
  let harness: SeparateNotifier;
  before(async () => {
    harness = await startWithSeparateNotifier();
  });
  after(() => harness.stop());

  test('counted once per result and announced once across two kills', async () => {
    // Held: the channel's requests are answered only once `release` is called (an order, not a time).
    let release = () => {};
    let held: Promise<void> | null = null;
    const receiver = await startTarget(() => (held ? { status: 200, until: held } : { status: 200 }));
    const failing = await startTarget(() => ({ status: 500 }));
    try {
      const { svc, nats } = harness;
      const first = await harness.spawn('notifier-1');
      await harness.started();
      const { api, orgId } = await svc.createOrg('pro');
      // No time condition here ("0s"): the third failure in a row disables.
      assert.equal((await api('PUT', '/organization', { auto_disable_after: '0s' })).status, 200);
      const channel = await api('POST', '/channels', { kind: 'webhook', name: 'ops', config: { url: `${receiver.url}/hook` }, events: ['schedule.disabled'] });
      assert.equal(channel.status, 201, JSON.stringify(channel.body));
      const sch = (await api('POST', '/schedules', { name: 'nightly', url: `${failing.url}/job`, cron: '0 0 1 1 *', retry_attempts: 0 })).body.data;
      const run = async () => {
        const id = (await api('POST', `/schedules/${sch.id}/trigger`, {})).body.data.execution_id;
        await eventually(async () => FINAL.includes((await api('GET', `/executions/${id}`)).body.data?.status), 60_000);
        return id as string;
      };
      const healthEvents = async () => (await readEvents(nats, `evt.${orgId}.schedule.${sch.id}`)).map((m) => m.event)
        .filter((e) => ['ScheduleFailureCounted', 'ScheduleDisabled', 'ScheduleFailuresReset'].includes(e.type));

      // Where the log ends before the first result: a checkpoint put back here is the crash
      // window of a reader that appended a count (or published a notification) and died
      // before moving its checkpoint past the result.
      const beforeOne = (await nats.jsm.streams.info('EVENTS')).state.last_seq;
      const checkpoints = await new Kvm(nats.nc).open('checkpoints');
      const rewind = () => checkpoints.put('notifier', String(beforeOne));

      // One failure, counted; then the counting process dies, its checkpoint put back before the result.
      const one = await run();
      await eventually(async () => (await healthEvents()).length === 1, 60_000);
      await first.kill9();
      await rewind();

      // Two more while no notifier runs: nothing counts them yet.
      const two = await run();
      held = new Promise<void>((r) => (release = r));
      const three = await run();
      assert.equal((await healthEvents()).length, 1);

      // The next notifier reads from that checkpoint: the first result is handed over again.
      const second = await harness.spawn('notifier-2');
      await eventually(async () => receiver.received.length === 1, 60_000);
      // Killed while the schedule.disabled notification is being sent.
      await second.kill9();
      // Put back before everything again: the third notifier decides the same announcement again.
      await rewind();
      release();
      held = null;
      await harness.spawn('notifier-3');
      await notifierIdle(svc.natsUrl, orgId);

      const events = await healthEvents();
      assert.deepEqual(events.map((e) => [e.type, e.data.execution_id]), [
        ['ScheduleFailureCounted', one], ['ScheduleFailureCounted', two], ['ScheduleDisabled', three],
      ], 'each result counted once, in order; disabled once');
      assert.equal(events[2]!.data.schedule.health.consecutive_failures, 3);
      const s = (await api('GET', `/schedules/${sch.id}`)).body.data;
      assert.deepEqual([s.enabled, s.disabled_reason], [false, 'failing']);
      const told = receiver.received.map((r) => JSON.parse(r.body));
      assert.equal(told.length, 1, 'the channel heard it once');
      assert.equal(told[0]!.event, 'schedule.disabled');
      assert.equal(told[0]!.schedule.id, sch.id);
    } finally {
      release();
      await receiver.close();
      await failing.close();
    }
  });
});

describe('destination health across a kill -9 of the partition owner', () => {
  let owners: Awaited<ReturnType<typeof serviceWithOwnersApart>>;
  before(async () => {
    owners = await serviceWithOwnersApart({ JETCRON_TIME_SCALE: '0.01' });
  });
  after(() => owners.stop());

  test('a delivery sent again by the next owner is still one result, counted once', async () => {
    const { svc, api } = owners;
    let held: Promise<void> | null = null;
    let release = () => {};
    const failing = await startTarget(() => (held ? { status: 500, until: held } : { status: 500 }));
    try {
      const first = await owners.dispatcher('owner-1');
      const orgId = (await api('GET', '/organization')).body.data.id;
      // Never disabled here: the count itself is what is checked.
      assert.equal((await api('PUT', '/organization', { auto_disable_after: null })).status, 200);
      const ep = (await api('POST', '/endpoints', { name: 'down', forward_urls: [`${failing.url}/hook`], retry_attempts: 0 })).body.data;
      const send = async () => {
        const res = await fetch(`${svc.url}/in/${ep.slug}`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(20_000) });
        assert.equal(res.status, 200);
      };
      const ended = async (n: number) => {
        const rows = (await api('GET', `/executions?endpoint_id=${ep.id}&limit=100`)).body.data as Array<{ status: string }>;
        return rows.filter((r) => FINAL.includes(r.status)).length === n;
      };
      const counted = async () => (await api('GET', `/endpoints/${ep.id}`)).body.data.forward_health[0].consecutive_failures;

      await send();
      await eventually(() => ended(1), 60_000);
      await notifierIdle(svc.natsUrl, orgId);
      assert.equal(await counted(), 1);

      // The second delivery is in flight when its owner dies; the next owner sends it again.
      held = new Promise<void>((r) => (release = r));
      await send();
      await eventually(async () => failing.received.length === 2, 60_000);
      await first.kill9();
      release();
      held = null;
      await owners.dispatcher('owner-2');
      await eventually(() => ended(2), 90_000);
      assert.ok(failing.received.length >= 3, 'sent again by the next owner');
      await send();
      await eventually(() => ended(3), 60_000);
      await notifierIdle(svc.natsUrl, orgId);
      assert.equal(await counted(), 3, 'three deliveries, three failures counted');
    } finally {
      release();
      await failing.close();
    }
  });
});
