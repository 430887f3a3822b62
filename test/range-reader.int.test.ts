/**
 * The range reader (a rebuild's and a replay's read of the log): every message of the
 * range once, in order, and nothing past its end; deleted messages passed over, a
 * deleted tail ending the read instead of waiting for it; a consumer lost under it
 * replaced from the next sequence; a follow (the events tap's read) waiting on. And a rebuild and a replay over such a log.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { sql } from 'kysely';
import { SUBJECTS } from '../streams/subjects.ts';
import { STREAMS } from '../streams/definitions.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { connectDb, type Db } from '../src/db/connect.ts';
import { migrate } from '../src/db/migrations.ts';
import { commitMessage } from '../src/commands/commit.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { encodeJson } from '../src/lib/json.ts';
import type { Nats } from '../src/nats/connection.ts';
import { readRange, deliveryOf, type RangeItem } from '../src/nats/range-reader.ts';
import { openSupervisor } from '../src/nats/supervisor.ts';
import { readCheckpoint, runProjection } from '../src/projections/projector.ts';
import { replayProjection } from '../src/replay/projection.ts';
import { createTestDatabase } from './support/postgres.ts';
import { rowsOf } from './support/read-model-rows.ts';
import { startNatsWithStreams } from './support/nats.ts';

let stack: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
const cleanups: (() => Promise<void>)[] = [];
before(async () => {
  stack = await startNatsWithStreams();
  nats = await stack.connect('range-reader test');
});
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await stack.stop();
});

const text = new TextDecoder();

/** A memory stream of its own holding messages `0`..`count - 1` at sequences 1..count. */
async function streamOf(name: string, count: number): Promise<void> {
  await nats.jsm.streams.add({ name, subjects: [`${name.toLowerCase()}.>`], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
  for (let i = 0; i < count; i++) await nats.publish(`${name.toLowerCase()}.x`, new TextEncoder().encode(String(i)), { msgId: `${name}-${i}` });
}

async function readAll(opts: { stream: string; startSeq: number; endSeq: number; pullMessages?: number; afterFirst?: () => Promise<void> }, log: (m: string) => void = () => {}): Promise<RangeItem[]> {
  const out: RangeItem[] = [];
  let first = true;
  for await (const batch of readRange(nats, { ...opts, signal: new AbortController().signal, log, name: 'test' })) {
    out.push(...batch);
    if (first && opts.afterFirst) await opts.afterFirst();
    first = false;
  }
  return out;
}

const seqs = (items: RangeItem[]) => items.map((i) => i.seq);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test('the reply subject of a delivery: sequence, consumer sequence and pending, in both forms; a status is none', () => {
  assert.deepEqual(deliveryOf('$JS.ACK.EVENTS.c1.1.42.7.1700000000000000000.3'), { seq: 42, cseq: 7, pending: 3 });
  assert.deepEqual(deliveryOf('$JS.ACK.hub.ACCHASH.EVENTS.c1.1.42.7.1700000000000000000.0.rand'), { seq: 42, cseq: 7, pending: 0 });
  assert.equal(deliveryOf(''), undefined);
  assert.equal(deliveryOf('_INBOX.abc'), undefined);
  assert.equal(deliveryOf('$JS.ACK.EVENTS.c1.1.x.7.1.0'), undefined);
});

test('a range is handed on once, in order, from its start through its end, and nothing stored after it', async () => {
  await streamOf('RA', 300);
  const items = await readAll({ stream: 'RA', startSeq: 5, endSeq: 200, pullMessages: 16 });
  assert.deepEqual(seqs(items), range(5, 200));
  assert.deepEqual(items.map((i) => text.decode(i.data)), range(4, 199).map(String));
  assert.ok(items.every((i) => i.subject === 'ra.x'));
  // The whole stream in the default pull size, and a range that starts past its end.
  assert.deepEqual(seqs(await readAll({ stream: 'RA', startSeq: 1, endSeq: 300 })), range(1, 300));
  assert.deepEqual(await readAll({ stream: 'RA', startSeq: 201, endSeq: 200 }), []);
});

test('deleted messages are passed over; a deleted tail ends the read, as does a range deleted whole', async () => {
  await streamOf('RB', 100);
  for (const seq of [1, 10, 11, 50, 98, 99, 100]) await nats.jsm.streams.deleteMessage('RB', seq);
  const kept = range(1, 100).filter((s) => ![1, 10, 11, 50, 98, 99, 100].includes(s));
  assert.deepEqual(seqs(await readAll({ stream: 'RB', startSeq: 1, endSeq: 100, pullMessages: 8 })), kept);
  assert.deepEqual(seqs(await readAll({ stream: 'RB', startSeq: 1, endSeq: 100 })), kept);
  assert.deepEqual(await readAll({ stream: 'RB', startSeq: 98, endSeq: 100 }), []);
});

test('a consumer deleted under the reader is replaced from the next sequence: nothing skipped, nothing twice', async () => {
  await streamOf('RC', 300);
  const logged: string[] = [];
  const items = await readAll({
    stream: 'RC', startSeq: 1, endSeq: 300, pullMessages: 10,
    // The reader holds at most four pulls' worth it has not handed on: most of the range is still to come.
    afterFirst: async () => {
      for await (const ci of await nats.jsm.consumers.list('RC')) await nats.jsm.consumers.delete('RC', ci.name);
    },
  }, (m) => logged.push(m));
  assert.deepEqual(seqs(items), range(1, 300));
  assert.ok(logged.some((l) => l.includes('reading again from seq')), logged.join('\n'));
  // Its consumers are gone once it has ended.
  let left = 0;
  for await (const _ of await nats.jsm.consumers.list('RC')) left++;
  assert.equal(left, 0);
});

/** A follow (`endSeq` Infinity) of `opts.stream` into `got`, until `reading` aborts; `waitFor(n, what)` waits (at most 30 s) until `what()` (`got`'s length) reaches n. */
function follow(opts: { stream: string; startSeq: number; pullExpiresMs?: number }) {
  const reading = new AbortController();
  const got: RangeItem[] = [];
  const logged: string[] = [];
  const done = (async () => {
    for await (const batch of readRange(nats, { ...opts, endSeq: Infinity, signal: reading.signal, log: (m) => logged.push(m), name: 'test' })) got.push(...batch);
  })();
  const waitFor = async (n: number, what: () => number = () => got.length) => {
    for (const t0 = Date.now(); what() < n; await new Promise((r) => setTimeout(r, 20))) {
      if (Date.now() - t0 > 30_000) throw new Error(`${what()} of ${n} within 30 s`);
    }
  };
  return { got, logged, reading, done, waitFor };
}

test('following (endSeq Infinity): what is stored later comes too, after a pull expired waiting, and its consumer goes with it when the read stops', async () => {
  await streamOf('RF', 3);
  const { got, logged, reading, done, waitFor } = follow({ stream: 'RF', startSeq: 2 });
  await waitFor(2);
  // Past a pull's expiry (5 s) with nothing new: the read sends another and waits on.
  await new Promise((r) => setTimeout(r, 6_000));
  for (let i = 3; i < 6; i++) await nats.publish('rf.x', new TextEncoder().encode(String(i)), { msgId: `RF-${i}` });
  await waitFor(5);
  assert.deepEqual(seqs(got), range(2, 6));
  assert.deepEqual(got.map((i) => text.decode(i.data)), ['1', '2', '3', '4', '5']);
  // An expired pull is not a lost consumer: it never started over.
  assert.ok(!logged.some((l) => l.includes('reading again')), logged.join('\n'));
  reading.abort();
  await done;
  let left = 0;
  for await (const _ of await nats.jsm.consumers.list('RF')) left++;
  assert.equal(left, 0);
});

test('a pull the server drops without a word (nats-server 2.9 and an expired pull) is sent again once it lapsed, on the same consumer', async () => {
  await streamOf('RD', 1);
  // The server's silent drop, as the reader sees it: a pull that is never answered (no
  // message, no 408, no heartbeat). Here the server never gets it.
  const publish = nats.nc.publish.bind(nats.nc);
  let dropNext = false;
  let dropped = 0;
  nats.nc.publish = ((subject: string, ...rest: Parameters<typeof publish> extends [string, ...infer R] ? R : never) => {
    if (dropNext && subject.startsWith('$JS.API.CONSUMER.MSG.NEXT.RD.')) {
      dropNext = false;
      dropped++;
      return;
    }
    return publish(subject, ...rest);
  }) as typeof publish;
  const { got, logged, reading, done, waitFor } = follow({ stream: 'RD', startSeq: 1, pullExpiresMs: 1_000 });
  try {
    await waitFor(1);
    // The pull in flight expires (408) and the one sent after it is lost.
    dropNext = true;
    await waitFor(1, () => dropped);
    await nats.publish('rd.x', new TextEncoder().encode('after'), { msgId: 'RD-after' });
    await waitFor(2);
    assert.deepEqual(got.map((i) => text.decode(i.data)), ['0', 'after']);
    // Sent again when it lapsed, not found by missed heartbeats (a new consumer).
    assert.ok(!logged.some((l) => l.includes('stopped answering') || l.includes('reading again')), logged.join('\n'));
    reading.abort();
    await done;
  } finally {
    nats.nc.publish = publish;
    reading.abort();
  }
});

// ---------------------------------------------------------------- over EVENTS

const ORG = 'org_rangetest';
let clock = Date.parse('2026-02-02T10:00:00.000Z');
const at = () => new Date((clock += 1000)).toISOString();
let n = 0;
const ev = (type: string, data: unknown) => ({ type, id: `evt_range_${++n}`, at: at(), org_id: ORG, data }) as unknown as JetcronEvent;

const monitor = () => {
  const created = at();
  return {
    id: 'mon_range', org_id: ORG, token: 'tok_range', name: 'backup', schedule_type: 'interval', interval_seconds: 3600, cron_expression: null, timezone: 'UTC',
    grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null, sync_key: null,
    max_duration_seconds: null, min_duration_seconds: null, slug: null, status: 'new', down_reason: null, paused: false, last_ping_at: null,
    next_expected_at: null, late_at: null, runs: [], deadline_at: null, created_at: created, updated_at: created,
  };
};
const ping = (m: ReturnType<typeof monitor>, i: number) => {
  const p = { id: `png_range_${i}`, received_at: at(), kind: 'success', exit_status: null, rid: null, duration_ms: null, method: 'POST', source_ip: '10.1.2.3', user_agent: 'curl', body: `ping ${i}` };
  return ev('MonitorPinged', { monitor: { ...m, status: 'up', last_ping_at: p.received_at, updated_at: p.received_at }, ping: p, previous_status: i ? 'up' : 'new' });
};
const task = (i: number) => {
  const created = at();
  return {
    id: `tsk_range_${i}`, org_id: ORG, name: `task ${i}`, url: `https://api.example.com/${i}`, method: 'POST', headers: {}, body: { n: i }, delay: null, run_at: null,
    timeout_ms: 30_000, retry_attempts: 3, callback_url: null, lane: null, flow_control: null, enabled: true, notify_on_failure: null, notify_on_recovery: null,
    expected_status_codes: null, expected_body_pattern: null, on_failure_url: null, on_recovery_url: null, script: null, debounce: null, debounce_key: null,
    created_at: created, updated_at: created, pending_execution: { id: `exe_range_${i}`, scheduled_for: created, callback_url: null },
  };
};
const finished = (t: ReturnType<typeof task>) => {
  const done = at();
  return ev('AttemptFinished', {
    execution_id: t.pending_execution.id, source: { type: 'task', id: t.id, name: t.name }, attempt: 1, status: 'success', status_code: 200, error_message: null,
    scheduled_for: done, started_at: done, finished_at: done, duration_ms: 12, request: { method: 'POST', url: t.url, headers: {}, body: null },
    response_body: 'ok', response_truncated: false, response_headers: { 'content-type': 'text/plain' }, script_logs: [], next_attempt_at: null, final: true,
    callback_url: null, push_callback_url: null, lane: null,
  });
};

async function freshDb(): Promise<{ db: Db; url: string }> {
  const database = await createTestDatabase();
  const { db } = connectDb(database.url, 2);
  cleanups.push(() => database.drop(), () => db.destroy());
  return { db, url: database.url };
}

test('over a log of single events and commits with messages deleted in it and at its end, a rebuild ends at the log\'s last sequence with the rows live gave, and so does a replay', async () => {
  const m = monitor();
  const tasks = Array.from({ length: 12 }, (_, i) => task(i));
  const publish = (subject: string, message: unknown, id: string) => nats.publish(subject, encodeJson(message), { msgId: id });
  await publish(`evt.${ORG}.monitor.${m.id}`, ev('MonitorCreated', { monitor: m }), 'range-mon');
  // Creates as one commit (the API's way), results as owners' commits of four, pings as single events.
  const creates = commitMessage('cmd_range_creates', tasks.map((t) => ev('TaskCreated', { task: t, execution: t.pending_execution })), new Date());
  await publish(SUBJECTS.batch(ORG, creates.id), creates, creates.id);
  const seqOfPing: number[] = [];
  for (let c = 0; c < 3; c++) {
    const results = commitMessage(`commit.0.1.${c}`, tasks.slice(c * 4, c * 4 + 4).map(finished), new Date());
    await publish(SUBJECTS.partition(0), results, results.id);
    for (let i = 0; i < 3; i++) seqOfPing.push(await publish(`evt.${ORG}.monitor.${m.id}`, ping(m, c * 3 + i), `range-ping-${c}-${i}`));
  }
  const target = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
  // A ping in the middle and the last two messages of the log deleted.
  for (const seq of [seqOfPing[2]!, target - 1, target]) await nats.jsm.streams.deleteMessage(STREAMS.events.name, seq);
  assert.equal((await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq, target, 'the stream\'s last sequence stays where it was');

  // Live: the tap, batches of three, until the last message still stored.
  const live = await freshDb();
  await migrate(live.db);
  const supervisor = await openSupervisor(nats, () => {});
  const run = new AbortController();
  const projecting = runProjection({ nats, db: live.db, log: () => {}, supervisor }, run.signal, { maxBatch: 3 });
  while ((await readCheckpoint(live.db)) < target - 2) await new Promise((r) => setTimeout(r, 20));
  run.abort();
  await projecting;
  supervisor.close();
  const expected = await rowsOf(live.db);
  assert.equal(expected.tasks!.length, 12);
  assert.equal(expected.pings!.length, 9 - 3);

  const rebuilt = await freshDb();
  const printed: unknown[] = [];
  await rebuildProjections({ natsUrl: stack.url, databaseUrl: rebuilt.url, dataDir: '/nonexistent', log: () => {}, print: (o) => printed.push(o) });
  assert.deepEqual(printed[0], { ...(printed[0] as object), rebuilt: true, events: target });
  assert.equal(await readCheckpoint(rebuilt.db), target);
  assert.deepEqual(await rowsOf(rebuilt.db), expected);

  const counted: string[] = [];
  const projection = {
    name: 'range_probe_v1',
    setup: async () => {},
    teardown: async () => {},
    apply: async (events: { event: JetcronEvent }[]) => void counted.push(...events.map((e) => e.event.type)),
  };
  const result = await replayProjection({ nats, db: rebuilt.db, databaseUrl: rebuilt.url, log: () => {} }, projection, { fromStart: true });
  assert.equal(result.last_seq, target);
  assert.equal(counted.length, 1 + 12 + 12 + 9 - 3);
  // Its checkpoint is in its own schema (analytics), never among the read models'.
  assert.equal(Number((await sql<{ seq: string }>`SELECT seq FROM analytics.jetcron_checkpoints WHERE name = 'range_probe_v1'`.execute(rebuilt.db)).rows[0]?.seq), target);
});
