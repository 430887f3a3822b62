import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { ApiError } from '../src/lib/errors.ts';
import { encodeJson } from '../src/lib/json.ts';
import { createLiveFeeds, type FeedSink, type LiveFeeds, type LiveFeedsOptions } from '../src/live/feeds.ts';
import { eventsTapReaders } from '../src/nats/events-tap.ts';
import { parseSse } from './support/sse.ts';
import { startNatsWithStreams } from './support/nats.ts';
import { eventually } from './support/wait.ts';

/**
 * How far "the read models" are, moved by the test: the projector's watermark
 * (src/projections/watermark.ts) has this shape; `asked` records what a feed waited for.
 */
function testWatermark(start = 0) {
  let seq = start;
  const waiters = new Set<{ target: number; resolve: (projected: boolean) => void }>();
  const asked: number[] = [];
  return {
    asked,
    get seq() {
      return seq;
    },
    waitFor(target: number, timeoutMs: number): Promise<boolean> {
      asked.push(target);
      if (target <= seq) return Promise.resolve(true);
      return new Promise((resolve) => {
        const w = { target, resolve: (p: boolean) => (clearTimeout(t), waiters.delete(w), resolve(p)) };
        const t = setTimeout(() => w.resolve(false), timeoutMs);
        waiters.add(w);
      });
    },
    advance(to: number) {
      seq = to;
      for (const w of [...waiters]) if (w.target <= seq) w.resolve(true);
    },
  };
}

/** A feed's client: the text it was sent, parsed. */
function sink() {
  let text = '';
  let ended = false;
  const s: FeedSink & { text: () => string; messages: () => any[]; ended: () => boolean } = {
    write: (chunk) => void (text += chunk),
    end: () => void (ended = true),
    text: () => text,
    messages: () => parseSse(text).events.map((e) => ({ event: e.event, ...JSON.parse(e.data) })),
    ended: () => ended,
  };
  return s;
}

/** Polls `check` with a generous deadline (a slow machine makes the test slower, never red). */
const until = (check: () => boolean, what: string) =>
  eventually(check, 30_000, 10).catch((err: Error) => assert.fail(`${what}: ${err.message}`));

let n = 0;
const envelope = (type: string, org: string, data: unknown) => ({ type, id: `e${++n}`, at: new Date().toISOString(), org_id: org, data });
const taskCreated = (org: string, task: string) =>
  [`evt.${org}.task.${task}`, envelope('TaskCreated', org, { task: { id: task, org_id: org, url: 'https://secret.example/x', headers: { Authorization: 'Bearer sekrit' } }, execution: { id: `exe_${task}` } })] as const;

describe('live feeds of one process', () => {
  let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
  const hubs: LiveFeeds[] = [];
  before(async () => {
    server = await startNatsWithStreams();
  });
  afterEach(async () => {
    for (const h of hubs.splice(0)) await h.close();
  });
  after(() => server.stop());

  /** A hub on a connection of its own (each connection has its own events tap). */
  async function hub(opts: Partial<LiveFeedsOptions> = {}, watermark = testWatermark(Number.MAX_SAFE_INTEGER)) {
    const nats = await server.connect('live-feeds test');
    const feeds = createLiveFeeds({ nats, watermark, log: () => {} }, { perOrg: 5, max: 10, ...opts });
    hubs.push(feeds);
    const publish = (subject: string, event: unknown) => nats.publish(subject, event instanceof Uint8Array ? event : encodeJson(event));
    return { nats, feeds, watermark, publish };
  }

  test('one reader of EVENTS serves every feed, from the end of the log, and is released with the last feed', async () => {
    const { nats, feeds, publish } = await hub();
    await publish(...taskCreated('org_a', 'tsk_before'));
    const a1 = sink();
    const a2 = sink();
    const fa1 = feeds.open('org_a', 'pk_org_a', a1);
    const fa2 = feeds.open('org_a', 'pk_org_a', a2);
    await Promise.all([fa1.ready, fa2.ready]);
    assert.equal(feeds.reading, true);
    await until(() => eventsTapReaders(nats) === 1, 'the feeds share one tap reader');
    await publish(...taskCreated('org_a', 'tsk_after'));
    await until(() => a1.messages().length > 0 && a2.messages().length > 0, 'both feeds get the event');
    for (const s of [a1, a2]) assert.deepEqual(s.messages().map((m) => m.id), ['tsk_after'], 'no backlog');

    fa1.close();
    fa1.close(); // twice: still one feed fewer, not two
    assert.equal(feeds.count, 1);
    assert.equal(feeds.reading, true);
    fa2.close();
    assert.equal(feeds.count, 0);
    assert.equal(feeds.reading, false);
    await until(() => eventsTapReaders(nats) === 0, 'the tap reader is released');
  });

  test("a feed carries its organization's events only, API key events included; ids and states, no definitions", async () => {
    const { feeds, publish } = await hub();
    const a = sink();
    const b = sink();
    await Promise.all([feeds.open('org_a', 'pk_org_a', a).ready, feeds.open('org_b', 'pk_org_b', b).ready]);
    await publish(...taskCreated('org_b', 'tsk_b1'));
    await publish('evt.apikey.pk_a', envelope('ApiKeyCreated', 'org_a', { key: { public_id: 'pk_a', org_id: 'org_a', secret_hash: 'hash-of-a' } }));
    // A subject and an envelope that disagree: neither organization's.
    await publish('evt.org_a.task.tsk_odd', envelope('TaskCreated', 'org_b', { task: { id: 'tsk_odd', org_id: 'org_b' }, execution: { id: 'exe_odd' } }));
    await publish('evt.org_a.task.tsk_new', envelope('SomethingNewer', 'org_a', {}));
    await publish('evt.org_a.task.tsk_bad', new TextEncoder().encode('{not json'));
    await publish(...taskCreated('org_a', 'tsk_a1'));
    await publish(...taskCreated('org_b', 'tsk_b2'));
    await until(() => a.messages().some((m) => m.id === 'tsk_a1') && b.messages().some((m) => m.id === 'tsk_b2'), 'the last events');
    assert.deepEqual(a.messages().map((m) => [m.event, m.type, m.id]), [['organization', 'ApiKeyCreated', 'org_a'], ['task', 'TaskCreated', 'tsk_a1']]);
    assert.deepEqual(b.messages().map((m) => [m.event, m.type, m.id]), [['task', 'TaskCreated', 'tsk_b1'], ['task', 'TaskCreated', 'tsk_b2']]);
    assert.deepEqual(a.messages()[1], { event: 'task', type: 'TaskCreated', kind: 'task', id: 'tsk_a1', task_id: 'tsk_a1', execution_id: 'exe_tsk_a1', status: 'pending', at: a.messages()[1].at });
    for (const leak of ['secret.example', 'sekrit', 'hash-of-a', 'pk_a']) assert.ok(!a.text().includes(leak) && !b.text().includes(leak), leak);
  });

  test("a monitor partition's commit (many organizations' pings) reaches each feed with its own organization's pings; a restatement is no message", async () => {
    const { feeds, publish } = await hub();
    const a = sink();
    await feeds.open('org_a', 'pk_org_a', a).ready;
    const monitor = (org: string, id: string) => ({ id, org_id: org, status: 'up', down_reason: null, last_ping_at: null, next_expected_at: null });
    const ping = { id: 'png_1', received_at: new Date().toISOString(), kind: 'success', exit_status: null, rid: null, duration_ms: null };
    await publish('evt.monitor-partition.3', {
      type: 'Commit', id: 'commit.3.1.0', at: new Date().toISOString(), from: 1, events: [
        envelope('MonitorPinged', 'org_b', { monitor: monitor('org_b', 'mon_b'), ping, previous_status: 'up' }),
        envelope('MonitorRestated', 'org_a', { monitor: monitor('org_a', 'mon_quiet'), restated_seq: 1 }),
        envelope('MonitorPinged', 'org_a', { monitor: monitor('org_a', 'mon_a'), ping, previous_status: 'new' }),
      ],
    });
    await publish(...taskCreated('org_a', 'tsk_after'));
    await until(() => a.messages().some((m) => m.id === 'tsk_after'), 'the event after the commit');
    assert.deepEqual(a.messages().map((m) => [m.event, m.type, m.id]), [['monitor', 'MonitorPinged', 'mon_a'], ['task', 'TaskCreated', 'tsk_after']]);
  });

  test('a message waits until the read models include its event, then goes out; past the wait it goes out anyway', async () => {
    const watermark = testWatermark(0);
    const { feeds, publish } = await hub({ projectedWaitMs: 60_000 }, watermark);
    const a = sink();
    await feeds.open('org_a', 'pk_org_a', a).ready;
    const seq = await publish(...taskCreated('org_a', 'tsk_wait'));
    // The feed has the event and waits for the read models to reach it.
    await until(() => watermark.asked.includes(seq), 'the feed waits for its event to be projected');
    assert.deepEqual(a.messages(), []);
    watermark.advance(seq);
    await until(() => a.messages().length === 1, 'sent once projected');

    const late = await hub({ projectedWaitMs: 50 }, testWatermark(0));
    const b = sink();
    await late.feeds.open('org_b', 'pk_org_b', b).ready;
    await late.publish(...taskCreated('org_b', 'tsk_never_projected'));
    await until(() => b.messages().length === 1, 'sent after the wait although never projected');
  });

  test("revoking a feed's API key ends that feed, and only it", async () => {
    const { feeds, publish } = await hub();
    const revoked = sink();
    const kept = sink();
    await Promise.all([feeds.open('org_a', 'pk_one', revoked).ready, feeds.open('org_a', 'pk_two', kept).ready]);
    await publish('evt.apikey.pk_one', envelope('ApiKeyRevoked', 'org_a', { key: { public_id: 'pk_one', org_id: 'org_a', revoked_at: new Date().toISOString() } }));
    await until(() => revoked.ended(), 'the feed of the revoked key ends');
    assert.equal(kept.ended(), false);
    assert.equal(feeds.count, 1);
    await until(() => kept.messages().some((m) => m.type === 'ApiKeyRevoked'), 'the other feed hears of it');
    assert.equal(revoked.messages().length, 0);
  });

  test('keep-alive comments reach idle feeds', async () => {
    const { feeds } = await hub({ keepAliveMs: 20 });
    const a = sink();
    await feeds.open('org_a', 'pk_org_a', a).ready;
    await until(() => a.text().includes(': keep-alive\n\n'), 'a keep-alive comment');
    assert.deepEqual(a.messages(), []);
  });

  test('bounds per organization and per process answer 429, and a closed feed frees its place', async () => {
    const { feeds } = await hub({ perOrg: 1, max: 2 });
    const fa = feeds.open('org_a', 'pk_org_a', sink());
    const refused = (fn: () => unknown, status: number, message: RegExp) =>
      assert.throws(fn, (err) => err instanceof ApiError && err.status === status && message.test(err.message) && Number(err.headers['Retry-After']) > 0);
    refused(() => feeds.open('org_a', 'pk_org_a', sink()), 429, /organization/);
    const fb = feeds.open('org_b', 'pk_org_b', sink());
    refused(() => feeds.open('org_c', 'pk_org_c', sink()), 429, /server/);
    fa.close();
    const fc = feeds.open('org_c', 'pk_org_c', sink());
    await Promise.all([fb.ready, fc.ready]);
    assert.equal(feeds.count, 2);
  });

  test('closing ends every feed and refuses new ones', async () => {
    const { nats, feeds } = await hub();
    const a = sink();
    await feeds.open('org_a', 'pk_org_a', a).ready;
    await feeds.close();
    assert.equal(a.ended(), true);
    assert.equal(feeds.count, 0);
    assert.equal(feeds.reading, false);
    await until(() => eventsTapReaders(nats) === 0, 'the tap reader is released');
    assert.throws(() => feeds.open('org_a', 'pk_org_a', sink()), (err) => err instanceof ApiError && err.status === 503);
  });
});
