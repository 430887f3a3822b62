import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DeliverPolicy } from '@nats-io/jetstream';
import pg from 'pg';
import { STREAMS } from '../streams/definitions.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import { loadConfig } from '../src/config.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { createdInBatch } from '../src/commands/task/load.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { retryConflicts, subjectsBusy } from '../src/commands/execute.ts';
import { ConcurrencyError, type EventStore } from '../src/commands/store.ts';
import { ApiError } from '../src/lib/errors.ts';
import { decodeJson } from '../src/lib/json.ts';
import { connectNats } from '../src/nats/connection.ts';
import { serve, type Running } from '../src/runtime/serve.ts';
import { eventually, startTestService, type Api, type TestService, secondLog } from './support/service.ts';

const CLIENTS = 64;
const ROUNDS = 5;

interface Answer {
  status: number;
  body: string;
}

/** `clients` parallel clients, each sending `rounds` requests one after another. */
async function hammer(clients: number, rounds: number, send: (client: number, round: number) => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let r = 0; r < rounds; r++) answers.push(await send(c, r));
  }));
  return answers;
}

const ping = async (url: string, body: string): Promise<Answer> => {
  const res = await fetch(url, { method: 'POST', body, signal: AbortSignal.timeout(30_000) });
  return { status: res.status, body: await res.text() };
};

/** Answers that are not 2xx, by status, with one body each for the failure message. */
function failures(answers: Answer[]): string {
  const bad = answers.filter((a) => a.status < 200 || a.status > 299);
  const byStatus = new Map<number, { count: number; body: string }>();
  for (const a of bad) byStatus.set(a.status, { count: (byStatus.get(a.status)?.count ?? 0) + 1, body: a.body });
  return [...byStatus].map(([s, { count, body }]) => `${count}× ${s} ${body.slice(0, 200)}`).join('; ');
}

describe('concurrent writes on one aggregate', () => {
  let svc: TestService;
  let second: Running;
  let db: pg.Client;
  before(async () => {
    svc = await startTestService();
    // A second API process on the same NATS and Postgres, like a scaled-out deployment.
    const config = loadConfig(
      { NATS_URL: svc.natsUrl, DATABASE_URL: svc.databaseUrl, PORT: '0', JETCRON_RATE_LIMIT_FREE: '0', JETCRON_RATE_LIMIT_PRO: '0' },
      { roles: 'api', dataDir: mkdtempSync(path.join(os.tmpdir(), 'jetcron-test-api2-')) },
    );
    second = await serve(config, secondLog);
    db = new pg.Client({ connectionString: svc.databaseUrl });
    await db.connect();
  });
  after(async () => {
    await db.end();
    await second.stop();
    await svc.stop();
  });

  // The pings route pages at most 100; the read model's table holds every one. A ping
  // answers once the log stored it, so the projection may still be catching up.
  const recordedPings = async (monitorId: string, expected: number): Promise<Set<string>> => {
    const read = async () => new Set((await db.query<{ body: string }>('SELECT body FROM pings WHERE monitor_id = $1', [monitorId])).rows.map((r) => r.body));
    // Waits until all are there; on a timeout the caller's assertion says how many are.
    await eventually(async () => (await read()).size >= expected, 30_000, 100).catch(() => undefined);
    return read();
  };

  const newMonitor = async (api: Api) => {
    const res = await api('POST', '/monitors', { name: 'busy', schedule_type: 'interval', interval_seconds: 3600 });
    assert.equal(res.status, 201);
    return res.body.data as { id: string; ping_url: string };
  };

  test(`${CLIENTS} clients × ${ROUNDS} pings to one ping_url: every answer 2xx, every ping recorded`, async (t) => {
    const { api } = await svc.createOrg();
    const m = await newMonitor(api);
    const t0 = Date.now();
    const answers = await hammer(CLIENTS, ROUNDS, (c, r) => ping(m.ping_url, `c${c}r${r}`));
    const ms = Date.now() - t0;
    const ok = answers.filter((a) => a.status === 200).length;
    const recorded = await recordedPings(m.id, CLIENTS * ROUNDS);
    t.diagnostic(`one process: ${ok}/${answers.length} answered 2xx, ${recorded.size} pings recorded, ${ms} ms`);
    assert.equal(ok, CLIENTS * ROUNDS, failures(answers));
    assert.equal(recorded.size, CLIENTS * ROUNDS);
    const page = await api('GET', `/monitors/${m.id}/pings?limit=100`);
    assert.equal(page.body.data.length, 100);
    assert.equal(new Set(page.body.data.map((p: { id: string }) => p.id)).size, 100, 'each ping is its own record');
    assert.equal((await api('GET', `/monitors/${m.id}`)).body.data.status, 'up');
  });

  test(`two API processes, ${CLIENTS} clients × ${ROUNDS} pings to one monitor: every answer 2xx, every ping recorded`, async (t) => {
    const { api } = await svc.createOrg();
    const m = await newMonitor(api);
    const token = new URL(m.ping_url).pathname;
    const t0 = Date.now();
    const answers = await hammer(CLIENTS, ROUNDS, (c, r) => ping(`${c % 2 ? svc.url : second.url}${token}`, `c${c}r${r}`));
    const ms = Date.now() - t0;
    const ok = answers.filter((a) => a.status === 200).length;
    const recorded = await recordedPings(m.id, CLIENTS * ROUNDS);
    t.diagnostic(`two processes: ${ok}/${answers.length} answered 2xx, ${recorded.size} pings recorded, ${ms} ms`);
    assert.equal(ok, CLIENTS * ROUNDS, failures(answers));
    assert.equal(recorded.size, CLIENTS * ROUNDS);
  });

  test('16 concurrent updates of one task: all 2xx, the final task is one of them, 16 TaskUpdated events', async (t) => {
    const { orgId, api } = await svc.createOrg();
    const created = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', run_at: new Date(Date.now() + 3600_000).toISOString(), body: 'v0' });
    assert.equal(created.status, 201);
    const id = created.body.data.id as string;
    const updates = Array.from({ length: 16 }, (_, i) => ({ name: `update-${i}`, body: `body-${i}`, headers: { 'x-update': String(i) } }));
    const answers = await Promise.all(updates.map((u) => api('PUT', `/tasks/${id}`, u)));
    const ok = answers.filter((a) => a.status === 200).length;
    assert.equal(ok, 16, answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${JSON.stringify(a.body)}`).join('; '));

    const final = (await api('GET', `/tasks/${id}`)).body.data;
    const winner = updates.find((u) => u.name === final.name);
    assert.ok(winner, `final name ${final.name} is one of the updates`);
    // Whole updates, never a mix of two.
    assert.equal(final.body, winner.body);
    assert.deepEqual(final.headers, winner.headers);

    const events = await taskEvents(svc.natsUrl, orgId, id);
    const types = events.map((e) => e.type);
    assert.deepEqual(types, ['TaskCreated', ...Array(16).fill('TaskUpdated')]);
    assert.deepEqual(new Set(events.slice(1).map((e) => e.type === 'TaskUpdated' && e.data.task.name)), new Set(updates.map((u) => u.name)));
    // The last event is the state: the read model shows that one.
    const last = events.at(-1)!;
    assert.equal(last.type === 'TaskUpdated' && last.data.task.name, final.name);
    t.diagnostic(`16/16 updates answered 2xx; log: ${types.length - 1} TaskUpdated; final = ${final.name}`);
  });

  test('16 concurrent updates of one task across two API processes: all 2xx, 16 TaskUpdated events', async () => {
    const { orgId, api, apiKey } = await svc.createOrg();
    const other = (await import('./support/service.ts')).apiClient(() => second.url!, apiKey);
    const created = await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', run_at: new Date(Date.now() + 3600_000).toISOString() });
    const id = created.body.data.id as string;
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 ? api : other)('PUT', `/tasks/${id}`, { name: `u-${i}` })));
    assert.deepEqual(answers.map((a) => a.status), Array(16).fill(200));
    const events = await subjectEvents<TaskEvent>(svc.natsUrl, SUBJECTS.task(orgId, id));
    assert.equal(events.filter((e) => e.type === 'TaskUpdated').length, 16);
  });

  test('16 concurrent debounced creates of one window across two API processes: all 201, one task', async () => {
    const { api, apiKey } = await svc.createOrg();
    const other = (await import('./support/service.ts')).apiClient(() => second.url!, apiKey);
    const base = { url: 'http://127.0.0.1:9/never', lane: 'deb', debounce: '1h', debounce_key: 'k' };
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 ? api : other)('POST', '/tasks', { ...base, body: `p${i}` })));
    assert.deepEqual(answers.map((a) => a.status), Array(16).fill(201), JSON.stringify(answers.find((a) => a.status !== 201)?.body));
    assert.equal(new Set(answers.map((a) => a.body.data.id)).size, 1, 'every request lands on the window\'s one task');
    assert.equal(answers.filter((a) => a.body.message === 'Debounce window opened').length, 1);
  });

  test('concurrent creates against the Free plan limit across two API processes: 10 created, the rest 403, none 5xx', async () => {
    const { api, apiKey } = await svc.createOrg();
    const other = (await import('./support/service.ts')).apiClient(() => second.url!, apiKey);
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) =>
      (i % 2 ? api : other)('POST', '/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600 })));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [...Array(10).fill(201), ...Array(14).fill(403)], JSON.stringify(answers.find((a) => a.status >= 500)?.body));
  });
});

describe('conflict handling without a service', () => {
  const store = {} as EventStore; // retryConflicts only keys its queues by the store

  test('a conflict that outlasts the time budget is a 503 with Retry-After, not a ConcurrencyError', async () => {
    let attempts = 0;
    const startedAt: number[] = [];
    const pending = retryConflicts({ store }, 'evt.org_x.monitor.mon_x', async () => {
      attempts++;
      startedAt.push(Date.now());
      throw new ConcurrencyError('evt.org_x.monitor.mon_x');
    }, 300);
    // The budget's deadline was set, on this clock, before this line: no attempt may start after it.
    const deadline = Date.now() + 300;
    const err = await pending.catch((e: unknown) => e);
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 503);
    assert.equal(err.headers['Retry-After'], '1');
    assert.doesNotMatch(err.message, /org_x|mon_x/, 'the subject is not revealed');
    assert.ok(attempts > 5, `kept retrying within the budget (${attempts} attempts)`);
    // However slowly this machine runs, the attempts stop at the budget (none starts after it).
    assert.ok(startedAt.every((at) => at <= deadline), `an attempt started ${Math.max(...startedAt) - deadline} ms after the budget was spent`);
    assert.equal(subjectsBusy(store), false, 'no entry left behind');
  });

  test('a command whose turn comes after its budget is spent answers 503 without being tried', async () => {
    let release!: () => void;
    const holding = retryConflicts({ store }, 'slow', () => new Promise<string>((r) => (release = () => r('held'))));
    let tried = false;
    const late = retryConflicts({ store }, 'slow', async () => { tried = true; return 'late'; }, 50).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    release();
    assert.equal(await holding, 'held');
    const err = await late;
    assert.ok(err instanceof ApiError && err.status === 503, String(err));
    assert.equal(tried, false);
    assert.equal(subjectsBusy(store), false);
  });

  test('attempts on one key run one at a time, in order; other keys in parallel; other errors pass through', async () => {
    const order: string[] = [];
    let running = 0;
    let peak = 0;
    const work = (key: string, i: number) => retryConflicts({ store }, key, async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 2));
      order.push(`${key}${i}`);
      running--;
      return i;
    });
    const results = await Promise.all([...Array.from({ length: 5 }, (_, i) => work('a', i)), work('b', 0)]);
    assert.deepEqual(results, [0, 1, 2, 3, 4, 0]);
    assert.deepEqual(order.filter((o) => o.startsWith('a')), ['a0', 'a1', 'a2', 'a3', 'a4']);
    assert.equal(peak, 2, 'a and b overlap, a never with itself');
    assert.equal(subjectsBusy(store), false);
    await assert.rejects(retryConflicts({ store }, 'a', async () => { throw new Error('boom'); }), /boom/);
    assert.equal(subjectsBusy(store), false, 'a failed holder releases its key');
    const again = await retryConflicts({ store }, 'a', async () => 'next');
    assert.equal(again, 'next', 'and the key takes work again');
    let conflicts = 2;
    const value = await retryConflicts({ store }, 'k', async () => {
      if (conflicts-- > 0) throw new ConcurrencyError('k');
      return 'stored';
    });
    assert.equal(value, 'stored');
    await assert.rejects(retryConflicts({ store }, 'k', async () => { throw new ApiError(404, 'Not found'); }), (e: unknown) => e instanceof ApiError && e.status === 404);
  });
});

/** Every event of one subject, oldest first, read straight from the log. */
/** A task's events: its create (from its loop turn's commit, when its id names one), then those on its own subject. */
async function taskEvents(natsUrl: string, orgId: string, id: string): Promise<TaskEvent[]> {
  const nats = await connectNats(natsUrl, 'concurrent-writes test');
  let created: TaskEvent | null;
  try {
    created = await createdInBatch(createEventStore(nats), orgId, id);
  } finally {
    await nats.close();
  }
  return [...(created ? [created] : []), ...(await subjectEvents<TaskEvent>(natsUrl, SUBJECTS.task(orgId, id)))];
}

async function subjectEvents<E>(natsUrl: string, subject: string): Promise<E[]> {
  const nats = await connectNats(natsUrl, 'concurrent-writes test');
  // A single subject as a string: nats-server 2.9 knows filter_subject, not the list form.
  try {
    const consumer = await nats.js.consumers.get(STREAMS.events.name, { filter_subjects: subject, deliver_policy: DeliverPolicy.All });
    const info = await consumer.info(true);
    const out: E[] = [];
    if (info.num_pending === 0) return out;
    const messages = await consumer.fetch({ max_messages: info.num_pending, expires: 5000 });
    for await (const m of messages) {
      out.push(decodeJson<E>(m.data));
      if (out.length === info.num_pending) break;
    }
    return out;
  } finally {
    await nats.close();
  }
}
