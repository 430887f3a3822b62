import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// A debounce of "300s" lasts 3 s: long enough for 20 sequential requests on a busy machine.
const SCALE = 0.01;

describe('debounce', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: String(SCALE) });
    api = (await svc.createOrg()).api;
  });
  after(() => svc.stop());

  test('20 requests in one window: one execution, the last payload, at the first request time + window', async () => {
    const target = await startTarget();
    try {
      const t0 = Date.now();
      const base = { url: `${target.url}/d`, lane: 'deb', debounce: '300s', debounce_key: 'user-1' };
      const first = await api('POST', '/tasks', { ...base, body: 'payload 0' });
      const t1 = Date.now();
      assert.equal(first.status, 201);
      const ids = new Set([first.body.data.id]);
      for (let i = 1; i < 20; i++) {
        const r = await api('POST', '/tasks', { ...base, body: `payload ${i}` });
        assert.equal(r.status, 201);
        ids.add(r.body.data.id);
        assert.equal(r.body.data.next_run_at ?? first.body.data.next_run_at, first.body.data.next_run_at);
      }
      assert.equal(ids.size, 1, 'every request in the window lands on one task');
      await eventually(async () => target.received.length === 1, 8000);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(target.received.length, 1);
      assert.equal(target.received[0]!.body, 'payload 19');
      // Not before the window ends, and due at the first request's time + window (no sliding):
      // every answer above carried that same next_run_at, and so does the one execution.
      const ranAfter = target.received[0]!.at - t0;
      assert.ok(ranAfter >= 300_000 * SCALE - 20, `ran ${ranAfter} ms after the first request`);
      const executions = (await api('GET', `/executions?task_id=${first.body.data.id}`)).body.data;
      assert.equal(executions.length, 1);
      assert.equal(executions[0].scheduled_for, first.body.data.next_run_at);
      // Fixed while the first request was being answered: between its start and its end, plus the window.
      const due = Date.parse(first.body.data.next_run_at);
      assert.ok(due >= t0 + 300_000 * SCALE - 5 && due <= t1 + 300_000 * SCALE, 'fixed by the first request');

      // After the window a new request opens a new window (a new task).
      const next = await api('POST', '/tasks', { ...base, body: 'next window' });
      assert.notEqual(next.body.data.id, first.body.data.id);
      await eventually(async () => target.received.length === 2, 8000);
      assert.equal(target.received[1]!.body, 'next window');
    } finally {
      await target.close();
    }
  });

  test('concurrent first requests elect one window', async () => {
    const target = await startTarget();
    try {
      const base = { url: `${target.url}/c`, lane: 'deb2', debounce: '60s', debounce_key: 'k' };
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => api('POST', '/tasks', { ...base, body: `p${i}` })));
      assert.ok(results.every((r) => r.status === 201), JSON.stringify(results.map((r) => [r.status, r.body?.error?.message])));
      assert.equal(new Set(results.map((r) => r.body.data.id)).size, 1);
      await eventually(async () => target.received.length === 1, 5000);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(target.received.length, 1);
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
