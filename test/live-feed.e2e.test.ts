import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { createApiKey, revokeApiKey } from '../src/commands/api-key/handlers.ts';
import { parseApiKey } from '../src/commands/api-key/secret.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { liveMessageSchema } from '../src/http/schemas/live.ts';
import { createClock } from '../src/lib/clock.ts';
import { connectNats } from '../src/nats/connection.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { openLiveFeed, type LiveFeedClient } from './support/sse.ts';
import { startTarget } from './support/target.ts';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => Ajv2020;
const validMessage = addFormats(new Ajv2020({ allErrors: true })).compile(liveMessageSchema);

const PER_ORG = 2;
const PER_PROCESS = 3;

interface Org {
  orgId: string;
  apiKey: string;
  api: Api;
}

describe('the live feed', () => {
  let svc: TestService;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let a: Org;
  let b: Org;
  const feeds: LiveFeedClient[] = [];
  const open = async (org: Org | null, headers?: Record<string, string>) => {
    const feed = await openLiveFeed(svc.url, org ? org.apiKey : null, headers);
    feeds.push(feed);
    return feed;
  };
  /** This process's open feeds, as /metrics reports them. */
  const openFeeds = async () => {
    const text = await (await fetch(`${svc.url}/metrics`)).text();
    const m = /^jetcron_live_feeds (\d+)$/m.exec(text);
    assert.ok(m, 'jetcron_live_feeds is exported');
    return Number(m[1]);
  };

  before(async () => {
    target = await startTarget();
    svc = await startTestService({ JETCRON_LIVE_FEEDS_PER_ORG: String(PER_ORG), JETCRON_LIVE_FEEDS_MAX: String(PER_PROCESS) });
    a = await svc.createOrg();
    b = await svc.createOrg();
  });
  // Each test starts with no feed open, so the bounds are all its own.
  afterEach(async () => {
    for (const f of feeds.splice(0)) f.close();
    await eventually(async () => (await openFeeds()) === 0, 10_000);
  });
  after(async () => {
    await svc?.stop();
    await target?.close();
  });

  test('answers 401 without a valid API key', async () => {
    for (const headers of [undefined, { Authorization: 'Bearer pk_nope.sk_nope' }, { Authorization: `Basic ${a.apiKey}` }]) {
      const res = await open(null, headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(typeof res.body?.error?.message, 'string');
      assert.notEqual(res.headers.get('content-type')?.startsWith('text/event-stream'), true);
    }
    assert.equal(await openFeeds(), 0);
  });

  test('HEAD answers with the stream\'s headers and holds no feed', async () => {
    const res = await fetch(`${svc.url}/api/v1/live`, { method: 'HEAD', headers: { Authorization: `Bearer ${a.apiKey}` }, signal: AbortSignal.timeout(20_000) });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(await openFeeds(), 0);
  });

  test("delivers a task's creation and its execution's outcome, to its own organization only, ids and states only", async () => {
    const feedA = await open(a);
    const feedB = await open(b);
    for (const f of [feedA, feedB]) {
      assert.equal(f.status, 200);
      assert.equal(f.headers.get('content-type'), 'text/event-stream; charset=utf-8');
      assert.equal(f.headers.get('cache-control'), 'no-store');
    }
    const secret = (org: string) => `sekrit-${org}-${Math.random().toString(36).slice(2)}`;
    const create = async (org: Org, name: string, marker: string) => {
      const res = await org.api('POST', '/tasks', { name, url: `${target.url}/live/${name}`, headers: { 'X-Token': marker }, body: { marker } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.data as { id: string; last_execution_id: string };
    };
    const markerA = secret('a');
    const markerB = secret('b');
    const taskA = await create(a, 'live-a', markerA);
    const taskB = await create(b, 'live-b', markerB);

    for (const [feed, task] of [[feedA, taskA], [feedB, taskB]] as const) {
      const created = await feed.waitFor((m) => m.type === 'TaskCreated' && m.id === task.id, 20_000, `TaskCreated of ${task.id}`);
      assert.deepEqual({ ...created, at: undefined }, {
        type: 'TaskCreated', kind: 'task', id: task.id, task_id: task.id, execution_id: task.last_execution_id, status: 'pending', at: undefined,
      });
      const finished = await feed.waitFor((m) => m.type === 'AttemptFinished' && m.id === task.last_execution_id, 20_000, `outcome of ${task.last_execution_id}`);
      assert.deepEqual({ ...finished, at: undefined }, {
        type: 'AttemptFinished', kind: 'execution', id: task.last_execution_id, execution_id: task.last_execution_id, task_id: task.id, status: 'success', at: undefined,
      });
      // The SSE event name is the kind.
      assert.equal(feed.messages.find((m) => m.data === finished)?.event, 'execution');
    }

    // A write of each organization after the other's events: once it is on a feed, every
    // earlier event of the log has been through that feed (one reader, in log order).
    await a.api('PUT', `/tasks/${taskA.id}`, { name: 'live-a2' });
    await b.api('PUT', `/tasks/${taskB.id}`, { name: 'live-b2' });
    await feedA.waitFor((m) => m.type === 'TaskUpdated' && m.id === taskA.id);
    await feedB.waitFor((m) => m.type === 'TaskUpdated' && m.id === taskB.id);

    const own = (org: Org, task: { id: string; last_execution_id: string }) => new Set([org.orgId, task.id, task.last_execution_id]);
    for (const [feed, org, task, other, otherTask, marker, otherMarker] of [
      [feedA, a, taskA, b, taskB, markerA, markerB],
      [feedB, b, taskB, a, taskA, markerB, markerA],
    ] as const) {
      const ids = own(org, task);
      for (const { data } of feed.messages) {
        assert.ok(validMessage(data), `${JSON.stringify(data)}: ${JSON.stringify(validMessage.errors)}`);
        for (const key of ['id', 'execution_id', 'task_id'] as const) {
          if (data[key] !== undefined) assert.ok(ids.has(data[key]), `${org.orgId}'s feed carried ${key} ${data[key]}`);
        }
      }
      const text = feed.text();
      for (const foreign of [other.orgId, otherTask.id, otherTask.last_execution_id, otherMarker]) assert.ok(!text.includes(foreign), `${org.orgId}'s feed carried ${foreign}`);
      // Never a body, a header, a URL or a name.
      for (const leak of [marker, target.url, 'X-Token', 'live-a', 'live-b']) assert.ok(!text.includes(leak), `the feed carried ${leak}`);
    }
    assert.ok(feedA.comments.includes('connected'));
  });

  test('bounds open feeds per organization and per process (429), and a closed client gives its place back', async () => {
    const first = await Promise.all(Array.from({ length: PER_ORG }, () => open(a)));
    assert.deepEqual(first.map((f) => f.status), Array(PER_ORG).fill(200));
    const overOrg = await open(a);
    assert.equal(overOrg.status, 429);
    assert.match(overOrg.body.error.message, /organization/);
    assert.ok(Number(overOrg.headers.get('retry-after')) > 0);

    // Another organization still has room, until the process is full.
    const fromB = await open(b);
    assert.equal(fromB.status, 200);
    assert.equal(await openFeeds(), PER_PROCESS);
    const overProcess = await open(b);
    assert.equal(overProcess.status, 429);
    assert.match(overProcess.body.error.message, /server/);

    // Clients that go away release their feeds: the places are free again.
    for (const f of first) f.close();
    await eventually(async () => (await openFeeds()) === 1, 10_000);
    const again = await Promise.all(Array.from({ length: PER_ORG }, () => open(a)));
    assert.deepEqual(again.map((f) => f.status), Array(PER_ORG).fill(200));
    // And they still deliver: the reader serves the new feeds.
    const res = await a.api('POST', '/tasks', { url: `${target.url}/after-reopen`, delay: '1h' });
    assert.equal(res.status, 201);
    for (const f of again) await f.waitFor((m) => m.type === 'TaskCreated' && m.id === res.body.data.id);
    assert.equal(fromB.messages.some((m) => m.data.id === res.body.data.id), false);
  });

  test('a client that disconnects is released', async () => {
    const feed = await open(a);
    assert.equal(feed.status, 200);
    assert.equal(await openFeeds(), 1);
    feed.close();
    await eventually(async () => (await openFeeds()) === 0, 10_000);
    // The next feed reads from the end of the log again: nothing of what happened meanwhile.
    const between = await a.api('POST', '/tasks', { url: `${target.url}/between`, delay: '1h' });
    assert.equal(between.status, 201);
    const next = await open(a);
    const after = await a.api('POST', '/tasks', { url: `${target.url}/after`, delay: '1h' });
    await next.waitFor((m) => m.type === 'TaskCreated' && m.id === after.body.data.id);
    assert.equal(next.messages.some((m) => m.data.id === between.body.data.id), false, 'no backlog');
  });

  test('revoking the API key ends the feeds opened with it', async () => {
    const conn = await connectNats(svc.natsUrl, 'live-feed test');
    try {
      const deps = { store: createEventStore(conn), clock: createClock(1) };
      const second = await createApiKey(deps, a.orgId);
      const doomed = await open({ ...a, apiKey: second.apiKey });
      const kept = await open(a);
      assert.deepEqual([doomed.status, kept.status], [200, 200]);
      await revokeApiKey(deps, parseApiKey(second.apiKey)!.publicId);
      await doomed.ended;
      const heard = await kept.waitFor((m) => m.type === 'ApiKeyRevoked');
      assert.deepEqual({ kind: heard.kind, id: heard.id }, { kind: 'organization', id: a.orgId });
      assert.ok(!kept.text().includes(second.key.public_id), 'key ids stay off the feed');
      assert.equal(await openFeeds(), 1);
      assert.equal((await open({ ...a, apiKey: second.apiKey })).status, 401);
    } finally {
      await conn.close();
    }
  });

  test('stopping the service ends open feeds', async () => {
    const feed = await open(a);
    assert.equal(feed.status, 200);
    await svc.restart();
    await feed.ended;
    const res = await open(a);
    assert.equal(res.status, 200);
  });
});
