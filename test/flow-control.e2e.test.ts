import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startGateTarget } from './support/gate-target.ts';
import { startTarget } from './support/target.ts';
import { readStatus } from '../src/cli/status.ts';
import { flowKeyPartition, taskPartition } from '../src/commands/partition/partition-of.ts';
import { statusText } from '../src/cli/status-text.ts';
import { connectDb } from '../src/db/connect.ts';
import { connectNats } from '../src/nats/connection.ts';

// Flow-control keys (the contract's "Flow control", issue 22): parallelism and a rate per
// key, across every task naming it, held in the owners' memory. Every check is an order
// or a count, never a time: a slow machine only spreads the starts further apart.

// 1 service minute = 6 ms: retries come quickly (a key's period is wall clock, not scaled).
const SCALE = '0.0001';

// The task partitions (the default, said here so the tests can place a lane beside its key or apart).
const PARTITIONS = 8;

let svc: TestService;
let api: Api;
let orgId: string;
let other: Api;

before(async () => {
  svc = await startTestService({ JETCRON_TIME_SCALE: SCALE, JETCRON_PARTITIONS: String(PARTITIONS) });
  ({ api, orgId } = await svc.createOrg());
  other = (await svc.createOrg()).api;
});
after(async () => {
  await svc?.stop();
});

const executionsOf = async (a: Api, ids: string[]) => Promise.all(ids.map(async (id) => (await a('GET', `/executions/${id}`)).body.data));
const allSucceeded = (a: Api, ids: string[]) =>
  eventually(async () => {
    const rows = await executionsOf(a, ids);
    return rows.every((e) => e.status === 'success') ? rows : null;
  }, 60_000, 100);

async function createTasks(a: Api, n: number, body: (i: number) => Record<string, unknown>): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await a('POST', '/tasks', body(i));
    assert.equal(res.status, 201, JSON.stringify(res.body));
    out.push(res.body.data.last_execution_id);
  }
  return out;
}

describe('validation: the field at fault is named', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['no key', { flow_control: { parallelism: 2 } }, 'flow_control.key'],
    ['an empty key', { flow_control: { key: '', parallelism: 2 } }, 'flow_control.key'],
    ['a key of 256 characters', { flow_control: { key: 'k'.repeat(256), parallelism: 2 } }, 'flow_control.key'],
    ['parallelism 0', { flow_control: { key: 'k', parallelism: 0 } }, 'flow_control.parallelism'],
    ['parallelism 1001', { flow_control: { key: 'k', parallelism: 1001 } }, 'flow_control.parallelism'],
    ['parallelism 1.5', { flow_control: { key: 'k', parallelism: 1.5 } }, 'flow_control.parallelism'],
    ['rate 0', { flow_control: { key: 'k', rate: 0 } }, 'flow_control.rate'],
    ['rate 100001', { flow_control: { key: 'k', rate: 100_001 } }, 'flow_control.rate'],
    ['a period that is no duration', { flow_control: { key: 'k', rate: 5, period: 'soon' } }, 'flow_control.period'],
    ['a period of 0s', { flow_control: { key: 'k', rate: 5, period: '0s' } }, 'flow_control.period'],
    ['neither parallelism nor rate', { flow_control: { key: 'k' } }, 'flow_control'],
    ['an unknown field', { flow_control: { key: 'k', rate: 5, burst: 3 } }, 'flow_control.burst'],
    ['lane and flow_control', { lane: 'l', flow_control: { key: 'k', rate: 5 } }, 'flow_control'],
  ];
  for (const [name, body, field] of cases) {
    test(`${name}: 422 on ${field}`, async () => {
      const res = await api('POST', '/tasks', { url: 'https://example.com/x', ...body });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.field, field, JSON.stringify(res.body));
    });
  }

  test('a batch: lane or flow_control, not both, not neither; its flow_control named as sent', async () => {
    const tasks = [{ url: 'https://example.com/a' }];
    const neither = await api('POST', '/tasks/batch', { tasks });
    assert.equal(neither.status, 422);
    assert.equal(neither.body.error.field, 'lane');
    const both = await api('POST', '/tasks/batch', { tasks, lane: 'l', flow_control: { key: 'k', rate: 3 } });
    assert.equal(both.body.error.field, 'flow_control');
    const bad = await api('POST', '/tasks/batch', { tasks, flow_control: { key: 'k', parallelism: 0 } });
    assert.equal(bad.body.error.field, 'flow_control.parallelism');
  });

  test('an update to a task of a lane must drop the lane to take a key', async () => {
    const t = (await api('POST', '/tasks', { url: 'https://example.com/x', lane: 'l', delay: '1d' })).body.data;
    const res = await api('PUT', `/tasks/${t.id}`, { flow_control: { key: 'k', parallelism: 1 } });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.field, 'flow_control');
    const ok = await api('PUT', `/tasks/${t.id}`, { lane: null, flow_control: { key: 'k', parallelism: 1 } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.data.flow_control, { key: 'k', parallelism: 1, rate: null, period: '1s' });
    assert.equal((await api('DELETE', `/tasks/${t.id}`)).status, 204);
  });
});

test('parallelism: the target sees at most N of a key open at once, and reaches N', async () => {
  const N = 3;
  const TOTAL = 12;
  // Each request is held until N are open, then (a moment later, for a request too many
  // to arrive meanwhile) the oldest is answered. Only N open frees one, so N is reached
  // on any machine; more than N open means the key let too many through.
  const target = await startGateTarget((_req, open) => {
    if (open >= N) setTimeout(releaseOldest, 30);
  });
  let answered = 0;
  const releaseOldest = () => target.received[answered++]?.release();
  try {
    const ids = await createTasks(api, TOTAL, (i) => ({ url: `${target.url}/p/${i}`, flow_control: { key: 'partner-api', parallelism: N } }));
    // The last ones can never make N open: answer whatever is open once all have arrived.
    await eventually(() => target.received.length === TOTAL, 60_000, 20);
    target.releaseAll();
    await allSucceeded(api, ids);
    assert.equal(target.maxOpen(), N, `at most ${N} at once, and ${N} reached`);
    assert.equal(new Set(target.received.map((r) => r.path)).size, TOTAL, 'each once');
  } finally {
    await target.close();
  }
});

test('order within a key: due at once, they start in order of creation', async () => {
  const target = await startTarget();
  try {
    const ids = await createTasks(api, 8, (i) => ({ url: `${target.url}/o/${i}`, flow_control: { key: 'ordered', parallelism: 1 } }));
    await allSucceeded(api, ids);
    assert.deepEqual(target.received.map((r) => r.path), ids.map((_, i) => `/o/${i}`));
  } finally {
    await target.close();
  }
});

test('rate: never more starts than the rate in any window of the period, as the attempts record them', async () => {
  const RATE = 4;
  const target = await startTarget();
  try {
    const ids = await createTasks(api, 13, (i) => ({ url: `${target.url}/r/${i}`, flow_control: { key: 'throttled', rate: RATE, period: '1s' } }));
    const rows = await allSucceeded(api, ids);
    const starts = rows.map((r) => Date.parse(r.started_at)).sort((a, b) => a - b);
    for (let i = 0; i + RATE < starts.length; i++) {
      assert.ok(starts[i + RATE]! - starts[i]! >= 1000, `${RATE + 1} starts within ${starts[i + RATE]! - starts[i]!} ms`);
    }
  } finally {
    await target.close();
  }
});

test('two keys, and one key name in two organizations, do not share limits', async () => {
  // Each key allows one at a time; all three hold their request open at once.
  const target = await startGateTarget();
  try {
    const a = await createTasks(api, 1, () => ({ url: `${target.url}/a`, flow_control: { key: 'shared-name', parallelism: 1 } }));
    const b = await createTasks(api, 1, () => ({ url: `${target.url}/b`, flow_control: { key: 'second-key', parallelism: 1 } }));
    const c = await createTasks(other, 1, () => ({ url: `${target.url}/c`, flow_control: { key: 'shared-name', parallelism: 1 } }));
    await eventually(() => target.open() === 3, 60_000, 20);
    target.releaseAll();
    await allSucceeded(api, [...a, ...b]);
    await allSucceeded(other, c);
  } finally {
    await target.close();
  }
});

test('a retry waiting for its time holds no slot: the next task of the key runs first', async () => {
  // a's first attempt is answered (500) only once b exists: b is then due before a's
  // retry (10 service minutes, 60 ms here) however slow the machine, and waits only for the slot.
  let bCreated!: () => void;
  const bExists = new Promise<void>((r) => (bCreated = r));
  const target = await startTarget((req) => {
    const first = req.path === '/retry/a' && target.received.filter((r) => r.path === '/retry/a').length === 1;
    return first ? { status: 500, until: bExists } : { status: 200 };
  });
  try {
    const [a] = await createTasks(api, 1, () => ({ url: `${target.url}/retry/a`, retry_attempts: 2, flow_control: { key: 'one-at-a-time', parallelism: 1 } }));
    const [b] = await createTasks(api, 1, () => ({ url: `${target.url}/retry/b`, flow_control: { key: 'one-at-a-time', parallelism: 1 } }));
    bCreated();
    await allSucceeded(api, [a!, b!]);
    assert.deepEqual(target.received.map((r) => r.path), ['/retry/a', '/retry/b', '/retry/a']);
  } finally {
    await target.close();
  }
});

test('pause holds everything and loses nothing; the keys list shows limits, what waits and runs, and the pause', async () => {
  const target = await startTarget();
  try {
    const paused = await api('POST', '/flow-control/held-key/pause');
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.deepEqual(paused.body.data, { key: 'held-key', parallelism: null, rate: null, period: null, waiting: 0, in_flight: 0, paused: true }, 'a key may be paused before any task names it');
    const ids = await createTasks(api, 5, (i) => ({ url: `${target.url}/held/${i}`, flow_control: { key: 'held-key', parallelism: 2, rate: 100, period: '1m' } }));
    // The owner holds all five, none started: had the pause not held, they would have run at once.
    const shown = await eventually(async () => {
      const res = await api('GET', '/flow-control/held-key');
      return res.body.data?.waiting === 5 ? res.body.data : null;
    }, 60_000, 50);
    assert.deepEqual(shown, { key: 'held-key', parallelism: 2, rate: 100, period: '1m', waiting: 5, in_flight: 0, paused: true });
    assert.equal(target.received.length, 0);
    const list = await api('GET', '/flow-control');
    assert.ok(list.body.data.some((k: { key: string }) => k.key === 'held-key'));
    assert.ok(!(await other('GET', '/flow-control')).body.data.some((k: { key: string }) => k.key === 'held-key'), 'another organization does not see it');
    const resumed = await api('POST', '/flow-control/held-key/resume');
    assert.equal(resumed.body.data.paused, false);
    await allSucceeded(api, ids);
    assert.equal(target.received.length, 5);
    const after = await eventually(async () => ((await api('GET', '/flow-control/held-key')).body.data.waiting === 0 ? true : null), 30_000, 50);
    assert.ok(after);
    assert.equal((await api('GET', '/flow-control/nobody-named-this')).status, 404);
  } finally {
    await target.close();
  }
});

test('a batch under a key: its tasks keep the key\'s parallelism and run in the batch\'s order', async () => {
  const target = await startGateTarget((_req, open) => {
    if (open >= 2) setTimeout(releaseOldest, 30);
  });
  let answered = 0;
  const releaseOldest = () => target.received[answered++]?.release();
  try {
    const tasks = Array.from({ length: 8 }, (_, i) => ({ url: `${target.url}/batch/${i}` }));
    const res = await api('POST', '/tasks/batch', { flow_control: { key: 'batch-key', parallelism: 2 }, tasks });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.data.lane, null);
    await eventually(() => target.received.length === 8, 60_000, 20);
    target.releaseAll();
    assert.equal(target.maxOpen(), 2);
    // Started in the batch's order: each start after the first two waits for an answer, so the arrivals past them keep it.
    assert.deepEqual(target.received.slice(2).map((r) => r.path), tasks.slice(2).map((_, i) => `/batch/${i + 2}`));
    const listed = (await api('GET', '/tasks')).body.data.filter((t: { flow_control: { key: string } | null }) => t.flow_control?.key === 'batch-key');
    assert.equal(listed.length, 8);
  } finally {
    await target.close();
  }
});

// A batch's tasks may each name a key (the contract's "Batches", decided 2026-12-06): they
// are still tasks of the batch's lane, and the lane's head starts only when its key has
// a free slot and room in its rate.
const laneExecutions = async (a: Api, lane: string): Promise<string[]> =>
  ((await a('GET', '/tasks')).body.data as Array<{ lane: string | null; created_at: string; id: string; last_execution_id: string }>)
    .filter((t) => t.lane === lane)
    .sort((x, y) => x.id.localeCompare(y.id))
    .map((t) => t.last_execution_id);

/** A lane of the organization whose partition is (or is not) its key's: a lane's head then waits in its own partition's key, or is handed to the key's. */
function laneBy(orgId: string, key: string, sameAsKey: boolean, prefix: string): string {
  for (let i = 0; ; i++) {
    const lane = `${prefix}-${sameAsKey ? 'beside' : 'apart'}-${i}`;
    if ((taskPartition({ org_id: orgId, id: 'x', lane, flow_control: null }, PARTITIONS) === flowKeyPartition(orgId, key, PARTITIONS)) === sameAsKey) return lane;
  }
}

for (const sameAsKey of [true, false]) {
  test(`a batch's lane task naming a key waits for its key's free slot; the lane waits for its head (lane ${sameAsKey ? 'in its key\'s partition' : 'in another partition'})`, async () => {
    const target = await startGateTarget();
    try {
      const key = { key: `lane-gate-key-${sameAsKey}`, parallelism: 1 };
      const lane = laneBy(orgId, key.key, sameAsKey, 'gate-lane');
      const [single] = await createTasks(api, 1, () => ({ url: `${target.url}/single`, flow_control: key }));
      // The single task holds the key's one slot until the test answers it.
      await eventually(() => target.received.length === 1, 60_000, 20);
      const res = await api('POST', '/tasks/batch', {
        lane,
        tasks: [{ url: `${target.url}/lane/0`, flow_control: key }, { url: `${target.url}/lane/1`, flow_control: key }, { url: `${target.url}/lane/2` }],
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.data.created, 3);
      // The lane's head is due and waits under the key, beside the single task in flight.
      await eventually(async () => {
        const k = (await api('GET', `/flow-control/${key.key}`)).body.data;
        return k?.waiting === 1 && k.in_flight === 1 ? k : null;
      }, 60_000, 50);
      assert.deepEqual(target.received.map((r) => r.path), ['/single']);
      const order = ['/lane/0', '/lane/1', '/lane/2'];
      for (const [i, next] of order.entries()) {
        target.received.at(-1)!.release();
        await eventually(() => target.received.length === 2 + i, 60_000, 20);
        assert.equal(target.received.at(-1)!.path, next);
      }
      target.received.at(-1)!.release();
      const executions = await laneExecutions(api, lane);
      assert.equal(executions.length, 3);
      await allSucceeded(api, [single!, ...executions]);
      assert.equal(target.maxOpen(), 1, 'one at a time: the key\'s one slot, then the lane');
      const keyed = (await api('GET', '/tasks')).body.data.filter((t: { lane: string | null; flow_control: unknown }) => t.lane === lane && t.flow_control);
      assert.equal(keyed.length, 2, 'each keyed task shows its key beside its lane');
    } finally {
      await target.close();
    }
  });
}

for (const sameAsKey of [true, false]) {
  test(`a lane cancel while the lane's head waits for its paused key cancels it; a resume then sends nothing of the lane (lane ${sameAsKey ? 'in its key\'s partition' : 'in another partition'})`, async () => {
    const target = await startTarget();
    try {
      const key = `cancel-key-${sameAsKey}`;
      const lane = laneBy(orgId, key, sameAsKey, 'cancel-lane');
      assert.equal((await api('POST', `/flow-control/${key}/pause`)).status, 200);
      const res = await api('POST', '/tasks/batch', { lane, tasks: [{ url: `${target.url}/cancelled/0`, flow_control: { key, parallelism: 1 } }, { url: `${target.url}/cancelled/1` }] });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      await eventually(async () => ((await api('GET', `/flow-control/${key}`)).body.data?.waiting === 1 ? true : null), 60_000, 50);
      const executions = await laneExecutions(api, lane);
      const cancelled = await api('DELETE', `/tasks?lane=${lane}`);
      assert.equal(cancelled.body.data.cancelled, 2, JSON.stringify(cancelled.body));
      await eventually(async () => ((await executionsOf(api, executions)).every((e) => e.status === 'cancelled') ? true : null), 60_000, 100);
      await eventually(async () => ((await api('GET', `/flow-control/${key}`)).body.data?.waiting === 0 ? true : null), 60_000, 50);
      // After the resume, a task of the key runs; had the lane's head still waited, it would have gone first.
      assert.equal((await api('POST', `/flow-control/${key}/resume`)).status, 200);
      const [after] = await createTasks(api, 1, () => ({ url: `${target.url}/after`, flow_control: { key, parallelism: 1 } }));
      await allSucceeded(api, [after!]);
      assert.deepEqual(target.received.map((r) => r.path), ['/after']);
    } finally {
      await target.close();
    }
  });
}

test('a paused key holds the lane\'s head naming it, and the lane behind it; a resume runs them in order', async () => {
  const target = await startTarget();
  try {
    assert.equal((await api('POST', '/flow-control/lane-paused-key/pause')).status, 200);
    const res = await api('POST', '/tasks/batch', {
      lane: 'paused-lane',
      tasks: [{ url: `${target.url}/held/0`, flow_control: { key: 'lane-paused-key', parallelism: 5 } }, { url: `${target.url}/held/1` }],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    await eventually(async () => ((await api('GET', '/flow-control/lane-paused-key')).body.data?.waiting === 1 ? true : null), 60_000, 50);
    assert.equal(target.received.length, 0, 'the head waits for its key, the lane for its head');
    assert.equal((await api('POST', '/flow-control/lane-paused-key/resume')).status, 200);
    await allSucceeded(api, await laneExecutions(api, 'paused-lane'));
    assert.deepEqual(target.received.map((r) => r.path), ['/held/0', '/held/1']);
  } finally {
    await target.close();
  }
});

test('a batch task\'s flow_control: an error names the task, and nothing of the batch is created', async () => {
  const url = 'https://example.com/never';
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ key: 'k', parallelism: 0 }, 'tasks[1].flow_control.parallelism'],
    [{ key: 'k', rate: 100_001 }, 'tasks[1].flow_control.rate'],
    [{ parallelism: 2 }, 'tasks[1].flow_control.key'],
    [{ key: 'k' }, 'tasks[1].flow_control'],
    [{ key: 'k', parallelism: 2, burst: 1 }, 'tasks[1].flow_control.burst'],
  ];
  for (const [flowControl, field] of cases) {
    const res = await api('POST', '/tasks/batch', { lane: 'refused-lane', delay: '1d', tasks: [{ url }, { url, flow_control: flowControl }] });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.field, field, JSON.stringify(res.body));
  }
  assert.deepEqual(await laneExecutions(api, 'refused-lane'), []);
});

test('pausing a key no task named yet creates this organization\'s paused key; another organization never sees or changes it', async () => {
  const target = await startTarget();
  try {
    const paused = await api('POST', '/flow-control/unnamed-key/pause');
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.deepEqual(paused.body.data, { key: 'unnamed-key', parallelism: null, rate: null, period: null, waiting: 0, in_flight: 0, paused: true });
    assert.equal((await api('GET', '/flow-control/unnamed-key')).body.data.paused, true);
    // The other organization: not there, and its resume changes nothing of ours.
    assert.equal((await other('GET', '/flow-control/unnamed-key')).status, 404);
    assert.ok(!(await other('GET', '/flow-control')).body.data.some((k: { key: string }) => k.key === 'unnamed-key'));
    assert.equal((await other('POST', '/flow-control/unnamed-key/resume')).status, 404);
    // Its own pause and resume of the same name are its own key's.
    assert.equal((await other('POST', '/flow-control/unnamed-key/pause')).body.data.paused, true);
    assert.equal((await other('POST', '/flow-control/unnamed-key/resume')).body.data.paused, false);
    assert.equal((await api('GET', '/flow-control/unnamed-key')).body.data.paused, true);
    // Our task naming the key waits; theirs runs.
    const [ours] = await createTasks(api, 1, () => ({ url: `${target.url}/ours`, flow_control: { key: 'unnamed-key', parallelism: 1 } }));
    const [theirs] = await createTasks(other, 1, () => ({ url: `${target.url}/theirs`, flow_control: { key: 'unnamed-key', parallelism: 1 } }));
    await allSucceeded(other, [theirs!]);
    await eventually(async () => ((await api('GET', '/flow-control/unnamed-key')).body.data.waiting === 1 ? true : null), 60_000, 50);
    assert.equal((await api('GET', `/executions/${ours}`)).body.data.status, 'pending');
    assert.deepEqual(target.received.map((r) => r.path), ['/theirs']);
    assert.equal((await api('POST', '/flow-control/unnamed-key/resume')).body.data.paused, false);
    await allSucceeded(api, [ours!]);
  } finally {
    await target.close();
  }
});

test('jetcron status: the keys known and paused, and what the owners hold now', async () => {
  const { orgId, api: own } = await svc.createOrg();
  assert.equal((await own('POST', '/flow-control/status-key/pause')).status, 200);
  await createTasks(own, 2, (i) => ({ url: `http://127.0.0.1:9/flow/${i}`, flow_control: { key: 'status-key', parallelism: 1 } }));
  const nats = await connectNats(svc.natsUrl, 'status test');
  const { db } = connectDb(svc.databaseUrl);
  try {
    const r = await eventually(async () => {
      const got = await readStatus({ nats, db, rollCallMs: 300 });
      return got.flow_control?.top.some((k) => k.key === 'status-key' && k.waiting === 2) ? got : null;
    }, 60_000, 100);
    const f = r.flow_control!;
    assert.deepEqual(f.top.find((k) => k.key === 'status-key'), { org_id: orgId, key: 'status-key', waiting: 2, in_flight: 0, paused: true });
    assert.ok(f.keys! >= 1 && f.paused! >= 1 && f.held >= 1 && f.waiting >= 2, JSON.stringify(f));
    const lines = statusText(r).split('\n');
    assert.ok(lines.includes('FLOW CONTROL'));
    assert.ok(lines.some((l) => new RegExp(`${orgId} +status-key +2 +0 +yes`).test(l)), lines.join('\n'));
  } finally {
    await nats.close();
    await db.destroy();
  }
});
