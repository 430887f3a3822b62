import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Kvm } from '@nats-io/kv';
import { SUBJECTS } from '../streams/subjects.ts';
import type { NotificationEvent } from '../src/commands/notification/types.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { decodeJson } from '../src/lib/json.ts';
import { notificationIdFor } from '../src/notifier/plan.ts';
import { notifierIdle } from './support/positions.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { signedWith, startTarget, type ReceivedRequest } from './support/target.ts';
import { startHangingTarget, startSmtp } from './support/smtp.ts';

// Notification retries (5 s, 20 s) become 5 ms and 20 ms.
const SCALE = 0.001;

const json = (r: ReceivedRequest) => JSON.parse(r.body);

describe('notifications for tasks', () => {
  let svc: TestService;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let nats: Nats;
  before(async () => {
    smtp = await startSmtp();
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE), SMTP_URL: smtp.url });
    nats = await connectNats(svc.natsUrl, 'notifier test');
  });
  after(async () => {
    await nats.close();
    await svc.stop();
    await smtp.close();
  });

  async function org(settings: Record<string, unknown>) {
    const o = await svc.createOrg();
    const put = await o.api('PUT', '/organization', settings);
    assert.equal(put.status, 200, JSON.stringify(put.body));
    return { ...o, secret: put.body.data.webhook_secret as string };
  }

  const finished = (api: Api, id: string) =>
    eventually(async () => {
      const e = (await api('GET', `/executions/${id}`)).body.data;
      return ['success', 'failed', 'timeout'].includes(e.status) ? e : null;
    });

  async function trigger(api: Api, taskId: string) {
    const res = await api('POST', `/tasks/${taskId}/trigger`);
    assert.equal(res.status, 202);
    return finished(api, res.body.data.execution_id);
  }

  /** The delivery records of one notification (`evt.<org>.notify.<id>`), in order. */
  async function deliveries(orgId: string, executionId: string): Promise<NotificationEvent[]> {
    const subject = SUBJECTS.notification(orgId, notificationIdFor(executionId));
    const out: NotificationEvent[] = [];
    let seq = 1;
    for (;;) {
      const m = await nats.jsm.direct.getMessage('EVENTS', { next_by_subj: subject, seq });
      if (!m) return out;
      out.push(decodeJson<NotificationEvent>(m.data));
      seq = m.seq + 1;
    }
  }

  test('first failure notifies once (webhook, email), repeats do not, success recovers', async () => {
    const hook = await startTarget();
    const target = await startTarget(() => ({ status: 500, body: 'boom' }));
    try {
      const o = await org({ notification_webhook_url: `${hook.url}/chat`, notification_email: 'ops@example.com' });
      const created = await o.api('POST', '/tasks', { name: 'nightly-report', url: `${target.url}/run`, retry_attempts: 0 });
      assert.equal(created.status, 201);
      const task = created.body.data;
      const exe = await finished(o.api, task.last_execution_id);
      assert.equal(exe.status, 'failed');

      const got = await eventually(async () => hook.received[0]);
      const body = json(got);
      assert.equal(body.event, 'task.failed');
      assert.deepEqual(body.task, { id: task.id, name: 'nightly-report', url: `${target.url}/run` });
      assert.deepEqual(Object.keys(body.execution).sort(), ['attempt', 'error_message', 'finished_at', 'id', 'scheduled_for', 'status', 'status_code']);
      assert.equal(body.execution.id, exe.id);
      assert.equal(body.execution.status, 'failed');
      assert.equal(body.execution.status_code, 500);
      assert.equal(body.execution.attempt, 1);
      assert.equal(body.execution.finished_at, exe.finished_at ?? body.execution.finished_at);
      assert.equal(typeof body.text, 'string');
      assert.equal(body.text, body.content);
      assert.match(body.text, /nightly-report.*failed.*HTTP 500/);
      assert.equal(got.method, 'POST');
      assert.equal(got.path, '/chat');
      assert.equal(got.headers['content-type'], 'application/json');
      assert.equal(got.headers['x-jetcron-execution-id'], exe.id);
      assert.equal(got.headers['x-jetcron-task-id'], task.id);
      assert.equal(got.headers['x-jetcron-event'], 'task.failed');
      assert.ok(signedWith(got, o.secret, exe.id), 'signed with the organization webhook secret');

      const mail = await eventually(async () => smtp.mails.find((m) => m.to.includes('ops@example.com')));
      assert.equal(mail.subject, '[jetcron] Task "nightly-report" failed');
      assert.match(mail.from, /alerts@jetcron\.test/);
      assert.match(mail.raw, new RegExp(exe.id));

      // Recorded: one NotificationSent per channel on the notification's subject.
      const recorded = await eventually(async () => {
        const d = await deliveries(o.orgId, exe.id);
        return d.length === 2 ? d : null;
      });
      assert.deepEqual(recorded.map((e) => [e.type, e.data.channel]).sort(), [['NotificationSent', 'email'], ['NotificationSent', 'org_webhook']]);
      assert.equal(recorded.find((e) => e.data.channel === 'org_webhook')!.data.status_code, 200);

      // Three more failures: still one notification.
      for (let i = 0; i < 3; i++) assert.equal((await trigger(o.api, task.id)).status, 'failed');
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.equal(hook.received.length, 1);
      assert.equal(smtp.mails.filter((m) => m.to.includes('ops@example.com')).length, 1);

      // A success: one recovery.
      target.setResponder(() => ({ status: 200, body: 'ok' }));
      const ok = await trigger(o.api, task.id);
      assert.equal(ok.status, 'success');
      const rec = await eventually(async () => hook.received[1]);
      const rb = json(rec);
      assert.equal(rb.event, 'task.recovered');
      assert.equal(rb.execution.id, ok.id);
      assert.equal(rb.execution.status, 'success');
      assert.equal(rb.execution.status_code, 200);
      assert.match(rb.text, /nightly-report.*recovered/);
      assert.ok(signedWith(rec, o.secret, ok.id));
      const recMail = await eventually(async () => smtp.mails.find((m) => m.subject === '[jetcron] Task "nightly-report" recovered'));
      assert.deepEqual(recMail.to, ['ops@example.com']);

      // Success after success: nothing.
      assert.equal((await trigger(o.api, task.id)).status, 'success');
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.equal(hook.received.length, 2);
      assert.equal(smtp.mails.filter((m) => m.to.includes('ops@example.com')).length, 2);
    } finally {
      await hook.close();
      await target.close();
    }
  });

  test('notify_on_failure false silences the organization channels, not on_failure_url / on_recovery_url', async () => {
    const hook = await startTarget();
    const own = await startTarget();
    const target = await startTarget(() => ({ status: 503 }));
    try {
      const o = await org({ notification_webhook_url: hook.url, notification_email: 'quiet@example.com' });
      const task = (await o.api('POST', '/tasks', {
        name: 'quiet',
        url: target.url,
        retry_attempts: 0,
        notify_on_failure: false,
        on_failure_url: `${own.url}/failed`,
        on_recovery_url: `${own.url}/recovered`,
      })).body.data;
      const exe = await finished(o.api, task.last_execution_id);
      assert.equal(exe.status, 'failed');

      const f = await eventually(async () => own.received.find((r) => r.path === '/failed'));
      const fb = json(f);
      assert.equal(fb.event, 'task.failed');
      assert.deepEqual(fb.task, { id: task.id, name: 'quiet', url: target.url });
      assert.equal(fb.execution.id, exe.id);
      assert.equal(fb.execution.status_code, 503);
      assert.equal(fb.text, undefined);
      assert.equal(fb.content, undefined);
      assert.ok(signedWith(f, o.secret, exe.id));
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.equal(hook.received.length, 0, 'the organization webhook hears nothing');
      assert.equal(smtp.mails.filter((m) => m.to.includes('quiet@example.com')).length, 0, 'no email either');

      // notify_on_recovery is null: the organization's setting (true) applies.
      target.setResponder(() => ({ status: 200 }));
      const ok = await trigger(o.api, task.id);
      const r = await eventually(async () => own.received.find((x) => x.path === '/recovered'));
      assert.equal(json(r).event, 'task.recovered');
      assert.equal(json(r).execution.id, ok.id);
      assert.ok(signedWith(r, o.secret, ok.id));
      const h = await eventually(async () => hook.received[0]);
      assert.equal(json(h).event, 'task.recovered');
      assert.equal(own.received.length, 2);
    } finally {
      await hook.close();
      await own.close();
      await target.close();
    }
  });

  test("the organization's notify_on_failure false applies to tasks that leave it null; true on the task overrides it", async () => {
    const hook = await startTarget();
    const target = await startTarget(() => ({ status: 500 }));
    try {
      const o = await org({ notification_webhook_url: hook.url, notify_on_failure: false });
      const inherit = (await o.api('POST', '/tasks', { name: 'inherit', url: target.url, retry_attempts: 0 })).body.data;
      const always = (await o.api('POST', '/tasks', { name: 'always', url: target.url, retry_attempts: 0, notify_on_failure: true })).body.data;
      await finished(o.api, inherit.last_execution_id);
      await finished(o.api, always.last_execution_id);
      const got = await eventually(async () => hook.received[0]);
      assert.equal(json(got).task.id, always.id);
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.deepEqual(hook.received.map((r) => json(r).task.name), ['always']);
    } finally {
      await hook.close();
      await target.close();
    }
  });

  test('a notification target that hangs delays neither executions nor other notifications; it is retried and given up', async () => {
    const dead = await startHangingTarget();
    const deadDown = await startTarget(() => ({ status: 502 }));
    const hook = await startTarget();
    const target = await startTarget(() => ({ status: 500 }));
    try {
      const slow = await org({ notification_webhook_url: dead.url });
      const down = await org({ notification_webhook_url: deadDown.url });
      const fine = await org({ notification_webhook_url: hook.url });
      // Ten tasks failing at once, each a first failure: ten deliveries to a target that never answers.
      const tasks = await Promise.all(Array.from({ length: 10 }, (_, i) => slow.api('POST', '/tasks', { name: `slow-${i}`, url: target.url, retry_attempts: 0 })));
      const exes = await Promise.all(tasks.map((t) => finished(slow.api, t.body.data.last_execution_id)));
      assert.ok(exes.every((e) => e.status === 'failed'));
      await eventually(async () => dead.received >= 10, 30_000);
      // A hanging delivery ends (recorded NotificationFailed) only after three tries of 10 s
      // each: until then, what finishes did not wait for it.
      const hanging = async () => (await Promise.all(exes.map((e) => deliveries(slow.orgId, e.id)))).flat();
      // The same task keeps running while its notifications hang.
      const again = await Promise.all(tasks.slice(0, 3).map((t) => trigger(slow.api, t.body.data.id)));
      assert.ok(again.every((e) => e.status === 'failed'));
      assert.deepEqual(await hanging(), [], 'the executions waited for the hanging notifications to end');

      // Another organization's notification goes out meanwhile, not behind the hanging ones.
      const other = (await fine.api('POST', '/tasks', { name: 'other', url: target.url, retry_attempts: 0 })).body.data;
      await finished(fine.api, other.last_execution_id);
      await eventually(async () => hook.received[0]);
      assert.deepEqual(await hanging(), [], 'the other organization\'s notification waited for the hanging ones to end');

      // A target answering 502 gets three tries (now, 5 s, 20 s scaled), then a NotificationFailed.
      const d = (await down.api('POST', '/tasks', { name: 'down', url: target.url, retry_attempts: 0 })).body.data;
      const de = await finished(down.api, d.last_execution_id);
      const failed = await eventually(async () => (await deliveries(down.orgId, de.id)).find((e) => e.type === 'NotificationFailed'));
      assert.equal(failed.data.attempts, 3);
      assert.equal(failed.data.status_code, 502);
      assert.equal(failed.data.channel, 'org_webhook');
      assert.equal(deadDown.received.length, 3);
      assert.ok(deadDown.received.every((r) => r.headers['x-jetcron-execution-id'] === de.id));
    } finally {
      await dead.close();
      await deadDown.close();
      await hook.close();
      await target.close();
    }
  });

  test('a restart, even one that re-reads the whole log, sends nothing twice', async () => {
    const hook = await startTarget();
    const target = await startTarget(() => ({ status: 500 }));
    try {
      const o = await org({ notification_webhook_url: hook.url });
      const task = (await o.api('POST', '/tasks', { name: 'flappy', url: target.url, retry_attempts: 0 })).body.data;
      await finished(o.api, task.last_execution_id);
      target.setResponder(() => ({ status: 200 }));
      await trigger(o.api, task.id);
      target.setResponder(() => ({ status: 500 }));
      await trigger(o.api, task.id);
      await eventually(async () => hook.received.length === 3);
      assert.deepEqual(hook.received.map((r) => json(r).event), ['task.failed', 'task.recovered', 'task.failed']);

      // Lose the notifier's checkpoint: it reads EVENTS from the start again.
      await svc.stopService();
      const kv = await new Kvm(nats.nc).open('checkpoints');
      await kv.put('notifier', '0');
      await svc.startService();

      // Still failing: another failure is not news; a new task's failure is (so the notifier has caught up).
      assert.equal((await trigger(o.api, task.id)).status, 'failed');
      const fresh = (await o.api('POST', '/tasks', { name: 'fresh', url: target.url, retry_attempts: 0 })).body.data;
      await finished(o.api, fresh.last_execution_id);
      await eventually(async () => hook.received.length === 4);
      await notifierIdle(svc.natsUrl, o.orgId);
      assert.deepEqual(hook.received.map((r) => `${json(r).task.name} ${json(r).event}`), [
        'flappy task.failed', 'flappy task.recovered', 'flappy task.failed', 'fresh task.failed',
      ]);
    } finally {
      await hook.close();
      await target.close();
    }
  });
});

describe('notifications and the SSRF guard', () => {
  let svc: TestService;
  let nats: Nats;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE), JETCRON_ALLOW_PRIVATE_TARGETS: '0' });
    nats = await connectNats(svc.natsUrl, 'notifier ssrf test');
  });
  after(async () => {
    await nats.close();
    await svc.stop();
  });

  test('a private notification target is refused once, not retried, and recorded as failed', async () => {
    const hook = await startTarget();
    try {
      const o = await svc.createOrg();
      assert.equal((await o.api('PUT', '/organization', { notification_webhook_url: `${hook.url}/chat` })).status, 200);
      // The task's own target is private too: the attempt is refused, a failure.
      const task = (await o.api('POST', '/tasks', { name: 'private', url: 'http://127.0.0.1:9/x', retry_attempts: 0 })).body.data;
      const subject = SUBJECTS.notification(o.orgId, notificationIdFor(task.last_execution_id));
      const failed = await eventually(async () => {
        const m = await nats.jsm.direct.getMessage('EVENTS', { last_by_subj: subject });
        return m ? decodeJson<NotificationEvent>(m.data) : null;
      });
      assert.equal(failed.type, 'NotificationFailed');
      assert.equal(failed.data.attempts, 1);
      assert.match(failed.data.error_message ?? '', /refused/);
      assert.equal(hook.received.length, 0);
    } finally {
      await hook.close();
    }
  });
});
