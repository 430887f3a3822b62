import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// 1 service minute = 1 s: a 60 s block lasts 1 s, the 30 s failure block 0.5 s.
const SCALE = 1 / 60;
const scaled = (ms: number) => Math.round(ms * SCALE);
// Slack for the API, projector, timers and redelivery between "the block ends" and "the request arrives".
const PROMPT_MS = 600;
/**
 * The service sets a block when it reads the 429: after the target sent it (`hitAt`)
 * and before the test saw the result (`seenAt`), however busy the machine. So its end
 * is at least `minMs` after the 429 and at most `maxMs` after it was seen (+ ms rounding).
 */
const assertBlock = (blockEnd: number, hitAt: number, seenAt: number, minMs: number, maxMs: number) =>
  assert.ok(blockEnd - hitAt >= minMs && blockEnd - seenAt <= maxMs + 2, `block ends ${blockEnd - hitAt} ms after the 429, ${blockEnd - seenAt} ms after it was seen (between ${minMs} and ${maxMs})`);

describe('per-host backoff', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
  });
  after(() => svc.stop());

  // GET /executions/{id} reads the row and its attempts in two queries, so a projection
  // commit between them can show a new attempt beside the older status: wait on both.
  const helpers = (api: Api) => {
    const execution = async (id: string) => (await api('GET', `/executions/${id}`)).body.data;
    return {
      execution,
      create: async (body: Record<string, unknown>) => {
        const res = await api('POST', '/tasks', body);
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return res.body.data as { id: string; last_execution_id: string; created_at: string };
      },
      finished: (id: string, status = ['success', 'failed', 'timeout']) =>
        eventually(async () => {
          const e = await execution(id);
          return status.includes(e.status) ? e : null;
        }),
    };
  };

  test('a 429 with Retry-After blocks its host for the org; a task created meanwhile waits, pending, while another host flows', async () => {
    const { api } = await svc.createOrg();
    const { execution, create, finished } = helpers(api);
    let n = 0;
    const limited = await startTarget(() => (n++ === 0 ? { status: 429, headers: { 'Retry-After': '90' }, body: 'slow down' } : { status: 200, body: 'ok' }));
    const other = await startTarget();
    try {
      // retry_attempts 0: the 429 must not use up the only attempt.
      const first = await create({ url: `${limited.url}/first`, retry_attempts: 0 });
      const rateLimited = await eventually(async () => {
        const e = await execution(first.last_execution_id);
        return e.status === 'pending' && e.attempts.length === 1 ? e : null;
      });
      const seenAt = Date.now();
      const hitAt = limited.received[0]!.at;
      assert.equal(rateLimited.status, 'pending');
      assert.equal(rateLimited.attempts[0].status_code, 429);
      assert.match(rateLimited.attempts[0].error_message, /blocked for this organization until/);
      const blockEnd = Date.parse(rateLimited.scheduled_for);
      assertBlock(blockEnd, hitAt, seenAt, scaled(90_000), scaled(90_000));

      const second = await create({ url: `${limited.url}/second` });
      const elsewhere = await create({ url: `${other.url}/elsewhere` });
      const waiting = await eventually(async () => {
        const e = await execution(second.last_execution_id);
        return e.status === 'pending' && e.scheduled_for && Math.abs(Date.parse(e.scheduled_for) - blockEnd) < 50 ? e : null;
      });
      assert.equal(waiting.attempts.length, 0);
      const task = (await api('GET', `/tasks/${second.id}`)).body.data;
      assert.equal(task.status, 'pending');
      assert.ok(Math.abs(Date.parse(task.next_run_at) - blockEnd) < 50, 'the task shows when it will run');

      const ok = await finished(elsewhere.last_execution_id);
      assert.equal(ok.status, 'success');
      assert.ok(other.received[0]!.at < blockEnd, 'another host is not held back');
      assert.ok(!limited.received.some((r) => r.path === '/second' && r.at < blockEnd), 'nothing sent to the blocked host during the block');

      const secondDone = await finished(second.last_execution_id);
      assert.equal(secondDone.status, 'success');
      const firstDone = await finished(first.last_execution_id);
      assert.equal(firstDone.status, 'success');
      assert.equal(firstDone.attempt, 2);
      assert.deepEqual(firstDone.attempts.map((a: { status_code: number }) => a.status_code), [429, 200]);
      for (const path of ['/first', '/second']) {
        const sent = limited.received.filter((r) => r.path === path).at(-1)!;
        assert.ok(sent.at >= blockEnd - 5 && sent.at < blockEnd + PROMPT_MS, `${path} sent ${sent.at - blockEnd} ms after the block ended`);
      }
      assert.equal(limited.received.length, 3);
    } finally {
      await limited.close();
      await other.close();
    }
  });

  test('a 429 with an HTTP-date Retry-After blocks until that date (scaled)', async () => {
    const { api } = await svc.createOrg();
    const { execution, create, finished } = helpers(api);
    let n = 0;
    const target = await startTarget(() => (n++ === 0
      ? { status: 429, headers: { 'Retry-After': new Date(Date.now() + 120_000).toUTCString() } }
      : { status: 200 }));
    try {
      const task = await create({ url: target.url });
      const limited = await eventually(async () => {
        const e = await execution(task.last_execution_id);
        return e.status === 'pending' && e.attempts.length === 1 ? e : null;
      });
      const seenAt = Date.now();
      // The date has whole seconds: 119-120 s from the 429, scaled.
      assertBlock(Date.parse(limited.scheduled_for), target.received[0]!.at, seenAt, scaled(118_000), scaled(120_000));
      const done = await finished(task.last_execution_id);
      assert.equal(done.status, 'success');
      assert.ok(target.received[1]!.at - target.received[0]!.at >= scaled(118_000));
    } finally {
      await target.close();
    }
  });

  test('a 429 without Retry-After blocks 60 s (scaled); another organization keeps sending to that host', async () => {
    const org1 = await svc.createOrg();
    const org2 = await svc.createOrg();
    const h1 = helpers(org1.api);
    const h2 = helpers(org2.api);
    let n = 0;
    const target = await startTarget(() => (n++ === 0 ? { status: 429 } : { status: 200 }));
    try {
      const t1 = await h1.create({ url: `${target.url}/org1` });
      const limited = await eventually(async () => {
        const e = await h1.execution(t1.last_execution_id);
        return e.status === 'pending' && e.attempts.length === 1 ? e : null;
      });
      const seenAt = Date.now();
      const blockEnd = Date.parse(limited.scheduled_for);
      assertBlock(blockEnd, target.received[0]!.at, seenAt, scaled(60_000), scaled(60_000));

      const t2 = await h2.create({ url: `${target.url}/org2` });
      const other = await h2.finished(t2.last_execution_id);
      assert.equal(other.status, 'success');
      // Not deferred by org1's block (a deferral moves the execution to the block's end),
      // read from the log's decision rather than from when it arrived, which a slow machine moves.
      assert.equal(other.attempts.length, 1);
      assert.ok(Date.parse(other.scheduled_for) <= Date.parse(t2.created_at), `the other organization is not blocked: scheduled ${other.scheduled_for}, created ${t2.created_at}, block ends ${new Date(blockEnd).toISOString()}`);
      const again = await h1.create({ url: `${target.url}/org1-again` });
      await h1.finished(again.last_execution_id);
      assert.ok(target.received.find((r) => r.path === '/org1-again')!.at >= blockEnd - 5);
    } finally {
      await target.close();
    }
  });

  test('three consecutive 5xx block the host 30 s (scaled), continued failures escalate, one success resets', async () => {
    const { api } = await svc.createOrg();
    const { execution, create, finished } = helpers(api);
    let up = false;
    const target = await startTarget(() => (up ? { status: 200 } : { status: 503, body: 'down' }));
    const sent = (path: string) => target.received.find((r) => r.path === path)!;
    const waitsUntil = async (exeId: string) =>
      eventually(async () => {
        const e = await execution(exeId);
        return e.status === 'pending' && e.scheduled_for && Date.parse(e.scheduled_for) > Date.parse(e.created_at) + 100 ? Date.parse(e.scheduled_for) : null;
      });
    try {
      for (const i of [1, 2]) {
        const t = await create({ url: `${target.url}/f${i}`, retry_attempts: 0 });
        const e = await finished(t.last_execution_id);
        assert.equal(e.status, 'failed');
        assert.doesNotMatch(e.error_message, /blocked/, 'failures 1 and 2 do not block');
      }
      const t3 = await create({ url: `${target.url}/f3`, retry_attempts: 0 });
      const e3 = await finished(t3.last_execution_id);
      assert.match(e3.error_message, /^HTTP 503; 127\.0\.0\.1:\d+ blocked for this organization until/);

      // Blocked 30 s: a new task waits, pending, until the block ends.
      const t4 = await create({ url: `${target.url}/f4`, retry_attempts: 0 });
      const until4 = await waitsUntil(t4.last_execution_id);
      const block1 = until4 - sent('/f3').at;
      assert.ok(block1 >= scaled(30_000) && block1 < scaled(30_000) + 300, `first block ${block1} ms`);
      await finished(t4.last_execution_id);
      assert.ok(sent('/f4').at >= until4 - 5 && sent('/f4').at < until4 + PROMPT_MS, `sent ${sent('/f4').at - until4} ms after the block`);

      // It failed again after the block: 60 s now.
      const t5 = await create({ url: `${target.url}/f5`, retry_attempts: 0 });
      const until5 = await waitsUntil(t5.last_execution_id);
      const block2 = until5 - sent('/f4').at;
      assert.ok(block2 >= scaled(60_000) && block2 < scaled(60_000) + 300, `second block ${block2} ms`);

      // The host recovers: the waiting task runs when the block ends and its success resets the streak.
      up = true;
      const ok = await finished(t5.last_execution_id);
      assert.equal(ok.status, 'success');
      assert.ok(sent('/f5').at >= until5 - 5 && sent('/f5').at < until5 + PROMPT_MS);

      // Two failures after the reset do not block.
      up = false;
      for (const i of [6, 7]) await finished((await create({ url: `${target.url}/f${i}`, retry_attempts: 0 })).last_execution_id);
      up = true;
      const createdAt = Date.now();
      const t8 = await create({ url: `${target.url}/f8`, retry_attempts: 0 });
      assert.equal((await finished(t8.last_execution_id)).status, 'success');
      assert.ok(sent('/f8').at - createdAt < scaled(30_000), `not blocked: sent after ${sent('/f8').at - createdAt} ms`);
    } finally {
      await target.close();
    }
  });

  test('connection failures count too: the 3rd in a row blocks the host', async () => {
    const { api } = await svc.createOrg();
    const { execution, create, finished } = helpers(api);
    const gone = await startTarget();
    const url = gone.url;
    await gone.close(); // nothing listens on that port now
    for (const i of [1, 2, 3]) {
      const e = await finished((await create({ url: `${url}/c${i}`, retry_attempts: 0 })).last_execution_id);
      assert.equal(e.status, 'failed');
      assert.equal(e.status_code, null);
    }
    const t4 = await create({ url: `${url}/c4`, retry_attempts: 0 });
    const waiting = await eventually(async () => {
      const e = await execution(t4.last_execution_id);
      return e.status === 'pending' && Date.parse(e.scheduled_for) > Date.parse(e.created_at) + 100 ? e : null;
    });
    assert.equal(waiting.attempts.length, 0);
    const done = await finished(t4.last_execution_id);
    assert.equal(done.status, 'failed');
    assert.ok(Date.parse(done.started_at) >= Date.parse(waiting.scheduled_for) - 5);
  });
});
