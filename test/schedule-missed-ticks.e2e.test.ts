import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// The contract's "missed ticks": ticks that came due while no process could run them
// (here the whole service stopped) are not all run on return; only the latest one due
// runs, late, under its own scheduled_for, and the others are counted in missed_ticks.

let svc: TestService;
let api: Api;

before(async () => {
  svc = await startTestService();
  ({ api } = await svc.createOrg('pro'));
});
after(async () => svc?.stop());

test('ticks missed while the service was stopped: the latest runs once, late; the others are counted', { timeout: 120_000 }, async () => {
  const target = await startTarget(() => ({ status: 200 }));
  try {
    const created = await api('POST', '/schedules', { url: `${target.url}/tick`, cron: '* * * * * *' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await eventually(() => target.received.length >= 2 || null, 30_000, 50);

    await svc.stopService();
    const stoppedAt = Date.now();
    // At least four ticks come due while nothing runs.
    await new Promise((r) => setTimeout(r, 4_500));
    const sentWhileStopped = target.received.length;
    await svc.startService();
    const restartedAt = Date.now();

    const schedule = await eventually(async () => {
      const got = (await api('GET', `/schedules/${id}`)).body.data;
      return got.missed_ticks >= 3 ? got : null;
    }, 30_000, 100);
    await api('PUT', `/schedules/${id}`, { enabled: false });

    const runs = (await api('GET', `/schedules/${id}/executions?limit=100`)).body.data as Array<{ scheduled_for: string }>;
    const times = runs.map((r) => Date.parse(r.scheduled_for));
    // The first tick that ran after the stop is the latest one due when the restarted
    // service recorded it (at least 4.5 s on, less one interval): the ticks of the stop
    // before it were skipped, not run late one after another.
    const afterStop = times.filter((t) => t >= stoppedAt).sort((x, y) => x - y);
    assert.ok(afterStop.length > 0, 'ticks run again after the restart');
    assert.ok(afterStop[0]! > stoppedAt + 3_000, `the first run after the stop is the latest due tick, not the first missed: ${new Date(afterStop[0]!).toISOString()} (stopped ${new Date(stoppedAt).toISOString()}, restarted ${new Date(restartedAt).toISOString()})`);
    assert.equal(new Set(times).size, times.length, 'no tick ran twice');
    assert.ok(schedule.missed_ticks >= 3, `missed_ticks ${schedule.missed_ticks}`);
    assert.ok(target.received.length > sentWhileStopped, 'ticks run again after the restart');
  } finally {
    await target.close();
  }
});
