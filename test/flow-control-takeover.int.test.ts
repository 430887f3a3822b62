import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, type Api } from './support/service.ts';
import { serviceWithOwnersApart } from './support/owner-processes.ts';
import { startGateTarget } from './support/gate-target.ts';

// Issue 22's case: the owner of a key's partition is killed (kill -9) with executions in
// flight and more waiting under the key. After the takeover the key's parallelism still
// holds, nothing is lost, and nothing is sent under a second execution id.

const N = 2;
const TOTAL = 10;

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

test('an owner killed with work waiting under a key: the new owner keeps the limit, loses nothing, sends each under its one id', { timeout: 240_000 }, async () => {
  let killed = false;
  let answered = 0;
  // Held until the owner is killed; afterwards N open frees the oldest still open (a moment later, so a request too many could show).
  const target = await startGateTarget((_req, open) => {
    if (killed && open >= N) setTimeout(releaseOldest, 30);
  });
  const releaseOldest = () => {
    while (answered < target.received.length) {
      const r = target.received[answered++]!;
      if (!(r as { gone?: boolean }).gone) return r.release();
    }
  };
  try {
    const first = await dispatcher('flow-owner-a');
    const ids: string[] = [];
    for (let i = 0; i < TOTAL; i++) {
      const res = await api('POST', '/tasks', { url: `${target.url}/k/${i}`, flow_control: { key: 'takeover-key', parallelism: N } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      ids.push(res.body.data.last_execution_id);
    }
    await eventually(() => target.open() === N, 60_000, 20);
    const heldByFirst = target.received.length;
    assert.equal(heldByFirst, N, 'the first owner sent N and waits for their answers');
    await first.kill9();
    // What the killed owner had open is over: its connections are gone.
    await eventually(() => target.open() === 0, 30_000, 20);
    for (const r of target.received) (r as { gone?: boolean }).gone = true;
    answered = target.received.length;
    const maxBefore = target.maxOpen();
    killed = true;
    await dispatcher('flow-owner-b');

    // Every task reaches the target; the last ones (fewer than N open) are answered once all have come.
    await eventually(() => new Set(target.received.map((r) => r.path)).size === TOTAL && target.open() < N, 120_000, 50);
    await eventually(() => {
      target.releaseAll();
      return target.open() === 0;
    }, 30_000, 50);
    const rows = await eventually(async () => {
      const got = await Promise.all(ids.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
      return got.every((x) => x.status === 'success') ? got : null;
    }, 120_000, 250);
    assert.equal(rows.length, TOTAL);
    assert.equal(maxBefore, N);
    assert.equal(target.maxOpen(), N, 'never more than N open, before or after the takeover');
    // The two the first owner had sent were sent again (at least once), under the same ids.
    const idOf = new Map<string, Set<string>>();
    for (const r of target.received) idOf.set(r.path, (idOf.get(r.path) ?? new Set()).add(r.executionId));
    for (let i = 0; i < TOTAL; i++) assert.deepEqual([...idOf.get(`/k/${i}`)!], [ids[i]], `task ${i}: one execution id`);
    assert.ok(rows.every((x) => x.attempt === 1), 'each recorded once');
  } finally {
    await target.close();
  }
});
