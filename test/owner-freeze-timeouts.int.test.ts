import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, type Api } from './support/service.ts';
import { serviceWithOwnersApart } from './support/owner-processes.ts';
import { startTarget } from './support/target.ts';

// Issue 34's stranded retries: the owner is frozen (SIGSTOP) past its lease *and* past
// its requests' timeout, so that when it is resumed (SIGCONT) the requests it had out
// end as timeouts with a retry planned, results it can only record late (fenced), after
// its successor has sent those executions again and settled them. Every execution must
// still reach a final state: none may stay pending past its scheduled_for.

const LANES = 10;
const PER_LANE = 6;
const TIMEOUT_MS = 1_000;
// Retries (2 min, 4.5 min, …) and lease waits run at this scale.
const SCALE = '0.001';

let owners: Awaited<ReturnType<typeof serviceWithOwnersApart>>;
let api: Api;

before(async () => {
  owners = await serviceWithOwnersApart({ JETCRON_TIME_SCALE: SCALE });
  api = owners.api;
});

after(async () => {
  await owners?.stop();
});

test('an owner frozen past its lease and its requests\' timeout, then resumed: its late timed-out results leave no execution pending past its time', { timeout: 240_000 }, async () => {
  const target = await startTarget(() => ({ status: 200, delayMs: 100 }));
  try {
    const first = await owners.dispatcher('owner-a');
    const probe = (await api('POST', '/tasks', { url: `${target.url}/probe` })).body.data;
    await eventually(async () => (await api('GET', `/executions/${probe.last_execution_id}`)).body.data.status === 'success', 60_000);
    await owners.dispatcher('owner-b');

    for (let l = 0; l < LANES; l++) {
      const tasks = Array.from({ length: PER_LANE }, (_, i) => ({ url: `${target.url}/lane/${l}/${i}` }));
      const res = await api('POST', '/tasks/batch', { lane: `late-${l}`, tasks, timeout_ms: TIMEOUT_MS, retry_attempts: 3 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const laneRequests = () => target.received.filter((r) => r.path.startsWith('/lane/'));

    // Frozen with requests out; resumed only once B has sent work and A's requests are past their timeout.
    await eventually(() => laneRequests().length >= LANES, 60_000, 5);
    process.kill(first.pid, 'SIGSTOP');
    const frozenAt = Date.now();
    const sentBefore = target.received.length;
    await eventually(() => target.received.length > sentBefore + LANES, 90_000, 100);
    await eventually(() => Date.now() - frozenAt > TIMEOUT_MS * 3, 10_000, 100);
    process.kill(first.pid, 'SIGCONT');
    await eventually(() => first.lines.some((l) => /lease has lapsed|claimed the partition|lease owner\.\d+: lost/.test(l)), 60_000, 100);

    // Every execution ends; while any is not final, none may be waiting past its time.
    await eventually(() => new Set(laneRequests().map((r) => r.path)).size === LANES * PER_LANE, 120_000, 100);
    const ids = [...new Set(laneRequests().map((r) => String(r.headers['x-jetcron-execution-id'])))];
    assert.equal(ids.length, LANES * PER_LANE, 'one execution per task');
    let overdue: unknown[] = [];
    const finals = new Set(['success', 'failed', 'timeout', 'cancelled']);
    const done = await eventually(async () => {
      const rows = await Promise.all(ids.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
      const now = Date.now();
      // Overdue: not final, due more than 5 s ago (a retry here waits at most a fraction of a second).
      overdue = rows.filter((x) => !finals.has(x.status) && Date.parse(x.scheduled_for) < now - 5_000).map((x) => ({ id: x.id, status: x.status, attempt: x.attempt, scheduled_for: x.scheduled_for }));
      return rows.every((x) => finals.has(x.status)) ? rows : null;
    }, 60_000, 500).catch(() => null);
    assert.ok(done, `executions not final 60 s on; overdue: ${JSON.stringify(overdue)}`);
    assert.ok(done.every((x) => x.status === 'success'), JSON.stringify(done.filter((x) => x.status !== 'success').map((x) => [x.id, x.status, x.error_message])));
  } finally {
    await target.close();
  }
});
