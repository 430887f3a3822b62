// kill -9 of the notifier in the middle of sending to channels: no channel gets one
// failure's notification twice. A chat channel whose send was cut short is not sent again
// (its receiver may have it; it cannot fold a repeat); PagerDuty, which folds a repeat into
// the open incident by its dedup_key, gets the same trigger again: one incident still.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Nats } from '../src/nats/connection.ts';
import { notificationRecords, notifierIdle } from './support/positions.ts';
import { startWithSeparateNotifier, type SeparateNotifier } from './support/separate-notifier.ts';
import { eventually, type TestService } from './support/service.ts';
import { startTarget, type ReceivedRequest } from './support/target.ts';

describe('notification channels under kill -9 of the notifier', () => {
  let harness: SeparateNotifier;
  let svc: TestService;
  let nats: Nats;
  const spawnNotifier = (label: string) => harness.spawn(label);
  before(async () => {
    // Every role but the notifier here; the notifier in processes of its own, to kill.
    harness = await startWithSeparateNotifier();
    ({ svc, nats } = harness);
  });
  after(() => harness.stop());

  test('a send cut short by kill -9 is not sent again to a chat; PagerDuty gets the same incident', async () => {
    // Held: requests are answered only once `release` is called (an order, not a time).
    let release = () => {};
    let held: Promise<void> | null = null;
    const receiver = await startTarget((r) => (held && r.path !== '/warm' ? { status: 200, until: held } : { status: r.path.startsWith('/pd') ? 202 : 200 }));
    const failing = await startTarget(() => ({ status: 500 }));
    try {
      const first = await spawnNotifier('notifier-1');
      // Its reader starts where the log ends when it first runs: wait until it has marked that.
      await harness.started();
      const o = await svc.createOrg();
      const create = async (body: Record<string, unknown>) => {
        const res = await o.api('POST', '/channels', body);
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return res.body.data;
      };
      const chat = await create({ kind: 'slack', name: 'chat', config: { webhook_url: `${receiver.url}/slack/T0/B0/secret-path-xxxx` } });
      const pager = await create({ kind: 'pagerduty', name: 'pager', config: { routing_key: 'R0UTINGKEY0000000000000000000000', api_url: `${receiver.url}/pd` } });
      // The notifier reads from where it started: a first failure shows it is reading.
      const warm = (await o.api('POST', '/tasks', { name: 'warm-up', url: failing.url, retry_attempts: 0, channels: [chat.id] })).body.data;
      await eventually(async () => (await notificationRecords(nats, o.orgId, warm.last_execution_id)).length === 1, 60_000);

      held = new Promise<void>((r) => (release = r));
      const task = (await o.api('POST', '/tasks', { name: 'nightly-report', url: failing.url, retry_attempts: 0 })).body.data;
      const of = (prefix: string) => receiver.received.filter((r) => r.path.startsWith(prefix) && r.body.includes(task.id));
      await eventually(async () => of('/slack/').length === 1 && of('/pd/').length === 1, 30_000);
      await first.kill9();
      release();
      held = null;

      await spawnNotifier('notifier-2');
      // Redelivered after the dead one's ack wait: each delivery ends once, recorded.
      const records = await eventually(async () => {
        const r = await notificationRecords(nats, o.orgId, task.last_execution_id);
        return r.length === 2 ? r : null;
      }, 90_000);
      await notifierIdle(svc.natsUrl, o.orgId);

      const chatRecord = records.find((e) => e.data.channel_id === chat.id)!;
      assert.equal(chatRecord.type, 'NotificationFailed');
      assert.match(chatRecord.data.error_message ?? '', /stopped while try 1 was being sent/);
      assert.equal(of('/slack/').length, 1, 'the chat got the failure once');

      const pagerRecord = records.find((e) => e.data.channel_id === pager.id)!;
      assert.equal(pagerRecord.type, 'NotificationSent');
      const triggers = of('/pd/').map((r: ReceivedRequest) => JSON.parse(r.body));
      assert.ok(triggers.length >= 1 && triggers.length <= 2);
      assert.ok(triggers.every((t) => t.event_action === 'trigger' && t.dedup_key === task.id), 'one incident: every trigger has the task as its dedup_key');

      // The chat channel is whole again: the next failure reaches it once.
      const next = (await o.api('POST', '/tasks', { name: 'after', url: failing.url, retry_attempts: 0, channels: [chat.id] })).body.data;
      await eventually(async () => (await notificationRecords(nats, o.orgId, next.last_execution_id)).some((e) => e.type === 'NotificationSent'), 60_000);
      assert.equal(receiver.received.filter((r) => r.body.includes(next.id)).length, 1);
    } finally {
      release();
      await receiver.close();
      await failing.close();
    }
  });
});
