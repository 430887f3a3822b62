// Destination health (issue 38; CONTRACT.md "Destination health: auto-disable") against
// the real service: a failing schedule is disabled with its reason and one notification;
// a success resets the count; a failing forward URL stops receiving while the other URL
// and the event store go on; enabling it with recover_since replays what it missed to it
// alone; the state survives a restart and a rebuild of the read models.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { notifierIdle, projectedUpToNow } from './support/positions.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';

type Target = Awaited<ReturnType<typeof startTarget>>;
const FINAL = ['success', 'failed', 'timeout', 'cancelled'];

/** Every execution of `query` (all pages). */
async function executions(api: Api, query: string): Promise<any[]> {
  const out: any[] = [];
  for (let offset = 0; ; offset += 100) {
    const res = await api('GET', `/executions?limit=100&offset=${offset}&${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    out.push(...res.body.data);
    if (!res.body.has_more) return out;
  }
}

/** The notifications of `event` a channel receiver got. */
const heard = (receiver: Target, event: string) => receiver.received.map((r) => JSON.parse(r.body)).filter((b) => b.event === event);

describe('destination health', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let orgId: string;
  let receiver: Target;
  /** Answers by path: `/fail…` 500, `/ok…` 200, `/a` and `/b` as `aFails` says / always 200. */
  let target: Target;
  let aFails = true;

  before(async () => {
    // auto_disable_after "1m" is 600 ms here: the time condition is met within a few runs.
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.01' });
    const org = await svc.createOrg('pro');
    ({ api, orgId } = org);
    other = (await svc.createOrg('pro')).api;
    receiver = await startTarget(() => ({ status: 200 }));
    target = await startTarget((r) => ({ status: r.path.startsWith('/fail') || (r.path.startsWith('/a') && aFails) ? 500 : 200 }));
    const set = await api('PUT', '/organization', { auto_disable_after: '1m', notify_on_failure: true });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.data.auto_disable_after, '1m');
  });
  after(async () => {
    await receiver?.close();
    await target?.close();
    await svc?.stop();
  });

  test('auto_disable_after: shown, default 5d, null = never, a bad value is 422 naming it', async () => {
    const fresh = (await svc.createOrg()).api;
    assert.equal((await fresh('GET', '/organization')).body.data.auto_disable_after, '5d');
    for (const bad of ['5 days', 'soon', 5, '-3d', '9999999d']) {
      const res = await fresh('PUT', '/organization', { auto_disable_after: bad });
      assert.equal(res.status, 422, `${bad}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.field, 'auto_disable_after');
    }
    const never = await fresh('PUT', '/organization', { auto_disable_after: null });
    assert.equal(never.status, 200);
    assert.equal(never.body.data.auto_disable_after, null);
    assert.equal((await fresh('GET', '/organization')).body.data.auto_disable_after, null);
  });

  /** Runs the schedule once (a trigger) and waits for the run's end; its execution row. */
  async function runOnce(scheduleId: string): Promise<any> {
    const res = await api('POST', `/schedules/${scheduleId}/trigger`, {});
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const id = res.body.data.execution_id ?? res.body.data.id;
    return eventually(async () => {
      const row = (await api('GET', `/executions/${id}`)).body.data;
      return row && FINAL.includes(row.status) ? row : null;
    }, 60_000);
  }

  /** Runs the schedule until destination health disables it (at most `max` runs); the runs. */
  async function runUntilDisabled(scheduleId: string, max: number): Promise<any[]> {
    const runs: any[] = [];
    for (let i = 0; i < max; i++) {
      runs.push(await runOnce(scheduleId));
      // Counted by the notifier's reader, after the run's end: wait until it has read it.
      await notifierIdle(svc.natsUrl, orgId);
      const s = (await api('GET', `/schedules/${scheduleId}`)).body.data;
      if (s.disabled_reason) return runs;
    }
    assert.fail(`not disabled after ${max} failed runs`);
  }

  test('a schedule failing long and often enough is disabled with its reason, and one notification goes to the channel', async () => {
    const channel = await api('POST', '/channels', { kind: 'webhook', name: 'health', config: { url: `${receiver.url}/hook` }, events: ['schedule.disabled', 'endpoint.disabled'] });
    assert.equal(channel.status, 201, JSON.stringify(channel.body));
    const created = await api('POST', '/schedules', { name: 'failing', url: `${target.url}/fail/s1`, cron: '0 0 1 1 *', retry_attempts: 0 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.data.disabled_reason, null);
    const sch = created.body.data;

    const runs = await runUntilDisabled(sch.id, 30);
    assert.ok(runs.length >= 3, `at least 3 failures in a row (disabled after ${runs.length})`);
    assert.ok(runs.every((r) => r.status === 'failed'));
    // The rule's time: the disabling failure came at least auto_disable_after (600 ms) after the first.
    assert.ok(Date.parse(runs.at(-1).finished_at) - Date.parse(runs[0].finished_at) >= 600, 'failing for at least auto_disable_after');
    const disabled = (await api('GET', `/schedules/${sch.id}`)).body.data;
    assert.equal(disabled.enabled, false);
    assert.equal(disabled.disabled_reason, 'failing');
    assert.equal(disabled.next_run_at, null);
    assert.equal('health' in disabled, false, 'the count is the service\'s, not the resource\'s');

    await notifierIdle(svc.natsUrl, orgId);
    const told = heard(receiver, 'schedule.disabled').filter((b) => b.schedule.id === sch.id);
    assert.equal(told.length, 1, 'one notification');
    assert.equal(told[0].schedule.url, sch.url);
    // It says which run disabled it and how that run ended.
    assert.deepEqual([told[0].execution.id, told[0].execution.status], [runs.at(-1).id, 'failed']);
    assert.match(told[0].text, /was disabled after failing again and again; the last: HTTP 500/);

    // Turned on again: the reason is cleared.
    const revived = await api('PUT', `/schedules/${sch.id}`, { enabled: true });
    assert.equal(revived.status, 200, JSON.stringify(revived.body));
    assert.equal(revived.body.data.enabled, true);
    assert.equal(revived.body.data.disabled_reason, null);
    assert.equal((await api('GET', `/schedules/${sch.id}`)).body.data.disabled_reason, null);
  });

  test('a success in between resets the count', async () => {
    const created = await api('POST', '/schedules', { name: 'flaky', url: `${target.url}/fail/s2`, cron: '0 0 1 1 *', retry_attempts: 0 });
    const sch = created.body.data;
    const setUrl = async (path: string) => assert.equal((await api('PUT', `/schedules/${sch.id}`, { url: `${target.url}${path}` })).status, 200);
    // Two failures, a success, two failures: never three in a row, whatever the time.
    const runs: any[] = [];
    for (const path of ['/fail/s2', '/fail/s2', '/ok/s2', '/fail/s2', '/fail/s2']) {
      await setUrl(path);
      runs.push(await runOnce(sch.id));
    }
    assert.deepEqual(runs.map((r) => r.status), ['failed', 'failed', 'success', 'failed', 'failed']);
    assert.ok(Date.parse(runs[4].finished_at) - Date.parse(runs[0].finished_at) >= 0);
    await notifierIdle(svc.natsUrl, orgId);
    const still = (await api('GET', `/schedules/${sch.id}`)).body.data;
    assert.equal(still.enabled, true, 'a success reset the count');
    assert.equal(still.disabled_reason, null);
    // Failing on from there: disabled once three in a row have failed for long enough.
    const more = await runUntilDisabled(sch.id, 30);
    assert.ok(more.length >= 1);
    assert.equal((await api('GET', `/schedules/${sch.id}`)).body.data.disabled_reason, 'failing');
  });

  /** One inbound event to the endpoint; its id. */
  async function sendEvent(ep: { slug: string }, n: number): Promise<string> {
    const res = await fetch(`${svc.url}/in/${ep.slug}`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'Content-Type': 'application/json' }, signal: AbortSignal.timeout(20_000) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return (JSON.parse(text) as { id: string }).id;
  }

  /** Events one at a time, each waited for to its deliveries' end and its counting, until the first forward URL is disabled; how many. */
  async function sendUntilDisabled(ep: { id: string; slug: string; forward_urls: string[] }): Promise<number> {
    for (let sent = 1; sent <= 30; sent++) {
      await sendEvent(ep, sent);
      await eventually(async () => (await executions(api, `endpoint_id=${ep.id}`)).filter((r) => FINAL.includes(r.status)).length === sent * ep.forward_urls.length, 60_000);
      await notifierIdle(svc.natsUrl, orgId);
      if ((await api('GET', `/endpoints/${ep.id}`)).body.data.forward_health[0].status === 'disabled') return sent;
    }
    assert.fail('the forward URL was not disabled within 30 events');
  }

  test('a forward URL disabled: events are stored, the other URL goes on, enable with recover_since replays to it alone', async () => {
    const a = `${target.url}/a`;
    const b = `${target.url}/b`;
    const created = await api('POST', '/endpoints', { name: 'two', forward_urls: [a, b], retry_attempts: 0 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const ep = created.body.data;
    assert.deepEqual(ep.forward_health, [
      { url: a, status: 'active', failing_since: null, consecutive_failures: 0, disabled_at: null },
      { url: b, status: 'active', failing_since: null, consecutive_failures: 0, disabled_at: null },
    ]);
    const since = new Date(Date.now() - 1000).toISOString();
    const send = (n: number) => sendEvent(ep, n);
    const toA = () => target.received.filter((r) => r.path === '/a').length;
    const toB = () => target.received.filter((r) => r.path === '/b').length;
    const deliveries = () => executions(api, `endpoint_id=${ep.id}`);

    let sent = await sendUntilDisabled(ep);
    assert.ok(sent >= 3);
    const disabled = (await api('GET', `/endpoints/${ep.id}`)).body.data.forward_health;
    assert.equal(disabled[0].status, 'disabled');
    assert.equal(disabled[0].consecutive_failures, sent);
    assert.ok(disabled[0].failing_since && disabled[0].disabled_at);
    assert.deepEqual(disabled[1], { url: b, status: 'active', failing_since: null, consecutive_failures: 0, disabled_at: null });
    const told = heard(receiver, 'endpoint.disabled').filter((x) => x.endpoint.id === ep.id);
    assert.equal(told.length, 1, 'one notification');
    assert.equal(told[0].endpoint.url, a, 'it names the URL');
    assert.equal(told[0].execution.status_code, 500);

    // Disabled: stored, B receives, A nothing (its deliveries cancelled unsent).
    const aBefore = toA();
    const bBefore = toB();
    const later = [await send(++sent), await send(++sent), await send(++sent)];
    await eventually(async () => toB() === bBefore + 3, 60_000);
    await eventually(async () => (await deliveries()).filter((r) => FINAL.includes(r.status)).length === sent * 2, 60_000);
    const stored = (await api('GET', `/endpoints/${ep.id}/events?limit=100`)).body.data.map((e: any) => e.id);
    for (const id of later) assert.ok(stored.includes(id), 'the event is stored');
    assert.equal(toA(), aBefore, 'nothing sent to the disabled URL');
    const cancelled = (await deliveries()).filter((r) => r.task.url === a && r.status === 'cancelled');
    assert.equal(cancelled.length, 3, 'its deliveries cancelled unsent');

    // Enable: unknown URL 422 naming url; another organization's endpoint 404.
    const unknown = await api('POST', `/endpoints/${ep.id}/forwards/enable`, { url: `${target.url}/c` });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.error.field, 'url');
    assert.equal((await other('POST', `/endpoints/${ep.id}/forwards/enable`, { url: a })).status, 404);
    const badSince = await api('POST', `/endpoints/${ep.id}/forwards/enable`, { url: a, recover_since: 'yesterday-ish' });
    assert.equal(badSince.status, 400);
    assert.equal(badSince.body.error.field, 'recover_since');
    assert.equal((await api('GET', `/endpoints/${ep.id}`)).body.data.forward_health[0].status, 'disabled', 'a refused call changed nothing');

    aFails = false;
    const enabled = await api('POST', `/endpoints/${ep.id}/forwards/enable`, { url: a, recover_since: since });
    assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
    assert.deepEqual(enabled.body.data.endpoint.forward_health[0], { url: a, status: 'active', failing_since: null, consecutive_failures: 0, disabled_at: null });
    const job = enabled.body.data.job;
    assert.equal(job.kind, 'replay');
    assert.deepEqual(job.forward_urls, [a]);
    // Every event's delivery to A failed or was cancelled: all of them are replayed to A.
    assert.equal(job.total, sent);
    const done = await eventually(async () => {
      const j = (await api('GET', `/jobs/${job.id}`)).body.data;
      return j.status === 'done' ? j : null;
    }, 60_000);
    assert.deepEqual([done.done, done.skipped], [sent, 0]);
    await eventually(async () => toA() === aBefore + sent, 60_000);
    await projectedUpToNow(svc.natsUrl, svc.databaseUrl);
    const bAfter = toB();
    assert.equal(bAfter, bBefore + 3, 'the replay sent nothing to B');
    const replays = await eventually(async () => {
      const rows = (await deliveries()).filter((r) => r.retry_of);
      return rows.length === sent && rows.every((r) => r.status === 'success') ? rows : null;
    }, 60_000);
    assert.ok(replays.every((r) => r.task.url === a));
    // Enabled again, with nothing missed: the same call again is no job of anything.
    const again = await api('POST', `/endpoints/${ep.id}/forwards/enable`, { url: a, recover_since: since });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.data.job.total, 0);
    // Without recover_since: no job.
    const plain = await api('POST', `/endpoints/${ep.id}/forwards/enable`, { url: a });
    assert.equal(plain.status, 200, JSON.stringify(plain.body));
    assert.equal(plain.body.data.job, null);
    // And new events reach A again.
    await send(++sent);
    await eventually(async () => toA() === aBefore + sent, 60_000);
  });

  test('disabled_reason and forward_health survive a restart and are the same after a rebuild', async () => {
    await projectedUpToNow(svc.natsUrl, svc.databaseUrl);
    const read = async () => ({
      schedules: (await api('GET', '/schedules?limit=100')).body.data.map((s: any) => ({ id: s.id, enabled: s.enabled, disabled_reason: s.disabled_reason })),
      endpoints: (await api('GET', '/endpoints?limit=100')).body.data.map((e: any) => ({ id: e.id, forward_health: e.forward_health })),
    });
    // A forward URL disabled beside one that works, and the schedule disabled above.
    const failing = (await api('POST', '/endpoints', { name: 'down', forward_urls: [`${target.url}/fail/e`, `${target.url}/ok/f`], retry_attempts: 0 })).body.data;
    await sendUntilDisabled(failing);
    await projectedUpToNow(svc.natsUrl, svc.databaseUrl);
    const before = await read();
    assert.ok(before.schedules.some((s: any) => s.disabled_reason === 'failing'));
    const health = before.endpoints.find((e: any) => e.id === failing.id).forward_health;
    assert.equal(health[0].status, 'disabled');
    assert.ok(health[0].consecutive_failures >= 3);
    assert.deepEqual([health[1].status, health[1].consecutive_failures], ['active', 0]);
    await svc.restart();
    assert.deepEqual(await read(), before);
    await svc.stopService();
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
    await svc.startService();
    assert.deepEqual(await read(), before);
  });
});
