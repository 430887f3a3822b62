import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { eventually } from './support/service.ts';
import { serviceWithOwnersApart } from './support/owner-processes.ts';
import { startTarget } from './support/target.ts';

type Target = Awaited<ReturnType<typeof startTarget>>;

// Schedules on the partition owners (issue 35): the process that owns every partition
// is frozen past its lease (SIGSTOP, then SIGCONT) or killed (-9) while 8 every-second
// schedules tick; another process takes the partitions over. No tick runs twice as two
// executions, the ticks that came due during the takeover run once, late (the latest
// due; the others count as missed_ticks), and every execution ends.

const SCHEDULES = 8;
let owners: Awaited<ReturnType<typeof serviceWithOwnersApart>> | undefined;
let target: Target | undefined;

afterEach(async () => {
  await target?.close();
  await owners?.stop();
  owners = undefined;
  target = undefined;
});

for (const how of ['frozen', 'killed'] as const) test(`the owner of every schedule ${how} mid-ticks: each tick once, the missed ones run late once, every execution ends`, { timeout: 240_000 }, async () => {
  owners = await serviceWithOwnersApart();
  const { api } = owners;
  target = await startTarget(() => ({ status: 200 }));
  const t = target;
  const first = await owners.dispatcher('owner-a');
  const ids: string[] = [];
  for (let i = 0; i < SCHEDULES; i++) {
    const res = await api('POST', '/schedules', { url: `${t.url}/s/${i}`, cron: '* * * * * *', retry_attempts: 0 });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    ids.push(res.body.data.id);
  }
  const arrivals = (i: number, after = 0) => t.received.filter((r) => r.path === `/s/${i}` && r.at > after);
  await eventually(() => ids.every((_, i) => arrivals(i).length >= 2), 60_000, 50);
  await owners.dispatcher('owner-b');

  const stoppedAt = Date.now();
  if (how === 'frozen') process.kill(first.pid, 'SIGSTOP');
  else await first.kill9();
  // B has taken over once every schedule ticks again.
  await eventually(() => ids.every((_, i) => arrivals(i, stoppedAt + 1_500).length >= 1), 120_000, 100);
  const takenOverAt = Date.now();
  if (how === 'frozen') {
    process.kill(first.pid, 'SIGCONT');
    await eventually(() => first.lines.some((l) => /lease has lapsed|claimed the partition|lease owner\.\d+: lost/.test(l)), 60_000, 100);
  }
  // A few more ticks on the new owner, then no more.
  await eventually(() => ids.every((_, i) => arrivals(i, takenOverAt).length >= 2), 60_000, 100);
  for (const id of ids) assert.equal((await api('PUT', `/schedules/${id}`, { enabled: false })).status, 200);

  for (const [i, id] of ids.entries()) {
    const runs = await eventually(async () => {
      const got = (await api('GET', `/schedules/${id}/executions?limit=100`)).body.data as Array<{ id: string; status: string; scheduled_for: string }>;
      return got.length && got.every((x) => x.status === 'success') ? got : null;
    }, 60_000, 250).catch(async () => {
      const got = (await api('GET', `/schedules/${id}/executions?limit=100`)).body.data as Array<{ status: string; scheduled_for: string }>;
      assert.fail(`schedule ${i}: not every execution ended: ${JSON.stringify(got.filter((x) => x.status !== 'success'))}`);
    });
    const ticks = runs.map((x) => x.scheduled_for);
    assert.equal(new Set(ticks).size, ticks.length, `schedule ${i}: a tick ran twice`);
    // Every request the target got is one of these executions (a re-send keeps its id).
    const known = new Set(runs.map((x) => x.id));
    assert.deepEqual(arrivals(i).map((r) => String(r.headers['x-jetcron-execution-id'])).filter((x) => !known.has(x)), [], `schedule ${i}: a request of no listed execution`);
    // The takeover's ticks: at least one ran late, and the others were counted as missed.
    const during = ticks.filter((x) => Date.parse(x) > stoppedAt + 1_000 && Date.parse(x) <= takenOverAt);
    assert.ok(during.length >= 1, `schedule ${i}: no tick of the takeover ran (${ticks.join(', ')})`);
    const schedule = (await api('GET', `/schedules/${id}`)).body.data;
    assert.ok(schedule.missed_ticks >= 1, `schedule ${i}: missed_ticks ${schedule.missed_ticks}`);
  }
});
