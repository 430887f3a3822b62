import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, type Api } from './support/service.ts';
import { serviceWithOwnersApart } from './support/owner-processes.ts';
import { startTarget } from './support/target.ts';

// Issue 21's case: the process that owns the partitions is frozen (SIGSTOP) past its
// lease, another process takes them over, and then the frozen one is resumed (SIGCONT)
// with attempts in flight and work it had queued. Fenced, not timed: nothing is lost,
// no lane ever runs two executions at once or out of order, nothing stays `running`.

const LANES = 12;
const PER_LANE = 12;
const TARGET_DELAY_MS = 150;

let owners: Awaited<ReturnType<typeof serviceWithOwnersApart>>;
let api: Api;
const dispatcher = (label: string) => owners.dispatcher(label);

before(async () => {
  owners = await serviceWithOwnersApart();
  api = owners.api;
});

after(async () => {
  await owners?.stop();
});

test('an owner frozen past its lease and resumed: the new owner finishes every lane in order, the old one is fenced and sends nothing new', { timeout: 240_000 }, async () => {
  const target = await startTarget(() => ({ status: 200, delayMs: TARGET_DELAY_MS }));
  try {
    const first = await dispatcher('owner-a');
    // A owns every partition once it has run something.
    const probe = (await api('POST', '/tasks', { url: `${target.url}/probe` })).body.data;
    await eventually(async () => (await api('GET', `/executions/${probe.last_execution_id}`)).body.data.status === 'success', 60_000);
    await dispatcher('owner-b');

    for (let l = 0; l < LANES; l++) {
      const tasks = Array.from({ length: PER_LANE }, (_, i) => ({ url: `${target.url}/lane/${l}/${i}` }));
      const res = await api('POST', '/tasks/batch', { lane: `freeze-${l}`, tasks });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const laneRequests = () => target.received.filter((r) => r.path.startsWith('/lane/'));

    // Freeze A mid-work, then wait for B to send something: only B can while A is stopped.
    await eventually(() => laneRequests().length >= LANES * 2, 60_000, 20);
    process.kill(first.pid, 'SIGSTOP');
    const frozenAt = target.received.length;
    await eventually(() => target.received.length > frozenAt + LANES, 90_000, 100);
    process.kill(first.pid, 'SIGCONT');
    // A notices on waking, whatever it held: its lease has lapsed, or its commit is fenced.
    await eventually(() => first.lines.some((l) => /lease has lapsed|claimed the partition|lease owner\.\d+: lost/.test(l)), 60_000, 100);

    // Every task's path reached the target, each under its execution's id.
    await eventually(() => new Set(laneRequests().map((r) => r.path)).size === LANES * PER_LANE, 120_000, 100);
    const idOf = new Map(laneRequests().map((r) => [r.path, String(r.headers['x-jetcron-execution-id'])]));
    const all = [...idOf.values()];
    assert.equal(new Set(all).size, LANES * PER_LANE, 'one execution per task');
    const rows = await eventually(async () => {
      const got = await Promise.all(all.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
      return got.every((x) => x.status === 'success') ? got : null;
    }, 120_000, 250);
    assert.equal(rows.length, LANES * PER_LANE);

    // Per lane: the target's arrivals go in creation order (a re-send of the execution in
    // flight at the freeze may repeat it, never an earlier one), and no two executions overlap.
    for (let l = 0; l < LANES; l++) {
      const arrivals = target.received
        .filter((r) => r.path.startsWith(`/lane/${l}/`))
        .map((r) => ({ id: String(r.headers['x-jetcron-execution-id']), index: Number(r.path.split('/')[3]), at: r.at }));
      assert.ok(arrivals.every((a) => idOf.get(`/lane/${l}/${a.index}`) === a.id), `lane ${l}: a task sent under two execution ids`);
      const order = arrivals.map((a) => a.index);
      assert.ok(order.every((x, i) => i === 0 || x >= order[i - 1]!), `lane ${l} out of order: ${order.join(',')}`);
      assert.deepEqual([...new Set(order)], Array.from({ length: PER_LANE }, (_, i) => i), `lane ${l}: each execution sent`);
      for (let i = 1; i < arrivals.length; i++) {
        const prev = arrivals[i - 1]!;
        const cur = arrivals[i]!;
        if (prev.id !== cur.id) assert.ok(cur.at >= prev.at + TARGET_DELAY_MS - 5, `lane ${l}: ${cur.id} arrived ${cur.at - prev.at} ms after ${prev.id} started`);
      }
    }
    // Nothing is left `running`, and each execution's result is recorded once: one attempt each.
    assert.ok(rows.every((x) => x.attempt === 1), JSON.stringify(rows.find((x) => x.attempt !== 1)));
  } finally {
    await target.close();
  }
});
