import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// A debounce of "600s" lasts 6 s. Whether 20 sequential requests land inside one window
// depends on how fast they are answered: a try whose last answer came after the window's
// end proves nothing, and the next try doubles the window (a fresh lane and key), so a
// slow machine makes the test slower, never red.
const SCALE = 0.01;
const WINDOW_SECONDS = 600;
const TRIES = 4;
describe('debounce', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  test('20 requests in one window: one execution, the last payload, at the first request time + window', async (t) => {
    const target = await startTarget();
    try {
      for (let attempt = 0; ; attempt++) {
        const seconds = WINDOW_SECONDS * 2 ** attempt;
        const windowMs = seconds * 1000 * SCALE;
        const path = `/d/${attempt}`;
        const t0 = Date.now();
        const base = { url: `${target.url}${path}`, lane: `deb-${attempt}`, debounce: `${seconds}s`, debounce_key: 'user-1' };
        const first = await api('POST', '/tasks', { ...base, body: 'payload 0' });
        const t1 = Date.now();
        assert.equal(first.status, 201);
        const rest = [];
        for (let i = 1; i < 20; i++) rest.push(await api('POST', '/tasks', { ...base, body: `payload ${i}` }));
        const due = Date.parse(first.body.data.next_run_at);
        if (Date.now() >= due) {
          assert.ok(attempt + 1 < TRIES, `the 20 requests were not all answered inside a ${windowMs} ms window`);
          t.diagnostic(`the 20 requests were not all answered inside a ${windowMs} ms window: trying ${2 * windowMs} ms`);
          continue;
        }
        const ids = new Set([first.body.data.id]);
        for (const r of rest) {
          assert.equal(r.status, 201);
          ids.add(r.body.data.id);
          assert.equal(r.body.data.next_run_at ?? first.body.data.next_run_at, first.body.data.next_run_at);
        }
        assert.equal(ids.size, 1, 'every request in the window lands on one task');
        const arrived = () => target.received.filter((r) => r.path === path);
        await eventually(async () => arrived().length === 1, windowMs + 30_000);
        assert.equal(arrived()[0]!.body, 'payload 19');
        // Not before the window ends, and due at the first request's time + window (no sliding):
        // every answer above carried that same next_run_at, and so does the one execution.
        const ranAfter = arrived()[0]!.at - t0;
        assert.ok(ranAfter >= windowMs - 20, `ran ${ranAfter} ms after the first request`);
        const executions = (await api('GET', `/executions?task_id=${first.body.data.id}`)).body.data;
        assert.equal(executions.length, 1);
        assert.equal(executions[0].scheduled_for, first.body.data.next_run_at);
        // Fixed while the first request was being answered: between its start and its end, plus the window.
        assert.ok(due >= t0 + windowMs - 5 && due <= t1 + windowMs, 'fixed by the first request');

        // After the window a new request opens a new window (a new task). It runs after the
        // first in the same lane, so once it arrived nothing more of the first window can.
        const next = await api('POST', '/tasks', { ...base, body: 'next window' });
        assert.notEqual(next.body.data.id, first.body.data.id);
        await eventually(async () => arrived().length >= 2, windowMs + 30_000);
        assert.deepEqual(arrived().map((r) => r.body), ['payload 19', 'next window']);
        return;
      }
    } finally {
      await target.close();
    }
  });

  test('concurrent first requests elect one window', async (t) => {
    const target = await startTarget();
    try {
      for (let attempt = 0; ; attempt++) {
        const seconds = WINDOW_SECONDS * 2 ** attempt;
        const windowMs = seconds * 1000 * SCALE;
        const path = `/c/${attempt}`;
        const lane = `deb2-${attempt}`;
        const base = { url: `${target.url}${path}`, lane, debounce: `${seconds}s`, debounce_key: 'k' };
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => api('POST', '/tasks', { ...base, body: `p${i}` })));
        assert.ok(results.every((r) => r.status === 201), JSON.stringify(results.map((r) => [r.status, r.body?.error?.message])));
        // Every answer before the earliest window's end: each request was decided inside it.
        if (Date.now() >= Math.min(...results.map((r) => Date.parse(r.body.data.next_run_at)))) {
          assert.ok(attempt + 1 < TRIES, `the ten requests were not all answered inside a ${windowMs} ms window`);
          t.diagnostic(`the ten requests were not all answered inside a ${windowMs} ms window: trying ${2 * windowMs} ms`);
          continue;
        }
        assert.equal(new Set(results.map((r) => r.body.data.id)).size, 1);
        const arrived = () => target.received.filter((r) => r.path === path);
        await eventually(async () => arrived().length === 1, windowMs + 30_000);
        // A later task in the same lane runs after the window's one: once it arrived, a second
        // delivery of the window could no longer come.
        const marker = await api('POST', '/tasks', { url: `${target.url}${path}`, lane, body: 'marker' });
        assert.equal(marker.status, 201);
        await eventually(async () => arrived().length >= 2, 40_000);
        assert.deepEqual(arrived().map((r) => r.body).slice(1), ['marker']);
        return;
      }
    } finally {
      await target.close();
    }
  });

  test('different keys or lanes debounce separately; the three fields go together', async () => {
    const a = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/x', lane: 'l', debounce: '1d', debounce_key: 'a' });
    const b = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/x', lane: 'l', debounce: '1d', debounce_key: 'b' });
    const c = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/x', lane: 'l2', debounce: '1d', debounce_key: 'a' });
    assert.equal(new Set([a.body.data.id, b.body.data.id, c.body.data.id]).size, 3);
    for (const [body, field] of [
      [{ url: 'http://127.0.0.1:9/x', debounce: '10s', debounce_key: 'a' }, 'lane'],
      [{ url: 'http://127.0.0.1:9/x', debounce: '10s', lane: 'l' }, 'debounce_key'],
      [{ url: 'http://127.0.0.1:9/x', debounce_key: 'a', lane: 'l' }, 'debounce'],
      [{ url: 'http://127.0.0.1:9/x', debounce: '10s', debounce_key: 'a', lane: 'l', delay: '5s' }, 'delay'],
    ] as const) {
      const r = await api('POST', '/tasks', body);
      assert.equal(r.status, 422, JSON.stringify(body));
      assert.equal(r.body.error.field, field);
    }
  });
});
