/**
 * Fencing by the log: a partition owner's commits are each guarded by the sequence of
 * its message before, so once another owner's claim is on the partition's subject the
 * old owner (frozen past its lease, cut off, or just slow) cannot append anything more.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { eventsOf } from '../src/commands/commit.ts';
import type { Envelope } from '../src/commands/envelope.ts';
import { decodeJson } from '../src/lib/json.ts';
import type { Nats } from '../src/nats/connection.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { claimPartition, Fenced } from '../src/owners/partition-log.ts';
import { startNatsWithStreams } from './support/nats.ts';

const ev = (n: number): Envelope => ({ type: 'Probe', id: `probe-${n}`, at: new Date(0).toISOString(), org_id: 'org_x', data: { n } });

let server: Awaited<ReturnType<typeof startNatsWithStreams>>;
let nats: Nats;
before(async () => {
  server = await startNatsWithStreams();
  nats = await server.connect('partition-fencing test');
});
after(async () => {
  await nats.close();
  await server.stop();
});

/** Every message on the partition's subject: [seq, type, event ids]. */
async function partitionMessages(partition: number): Promise<Array<{ seq: number; type: string; ids: string[] }>> {
  const out: Array<{ seq: number; type: string; ids: string[] }> = [];
  const info = await nats.jsm.streams.info('EVENTS');
  for (let seq = 1; seq <= info.state.last_seq; seq++) {
    const m = await nats.jsm.streams.getMessage('EVENTS', { seq }).catch(() => null);
    if (!m || m.subject !== SUBJECTS.partition(partition)) continue;
    const decoded = decodeJson<{ type: string }>(m.data);
    out.push({ seq, type: decoded.type, ids: eventsOf(decoded).map((e) => e.id) });
  }
  return out;
}

test('what one turn appends goes out as one commit, in order, and each append learns its sequence', async () => {
  const store = createEventStore(nats);
  const log = await claimPartition({ nats, store }, { partition: 1, owner: 'a' });
  const [s1, s2, s3] = await Promise.all([log.append([ev(1)]), log.append([ev(2), ev(3)]), log.append([ev(4)])]);
  assert.equal(s1, s2);
  assert.equal(s2, s3);
  const s4 = await log.append([ev(5)]);
  assert.ok(s4 > s3);
  const msgs = await partitionMessages(1);
  assert.deepEqual(msgs.map((m) => m.type), ['PartitionClaimed', 'Commit', 'Commit']);
  assert.deepEqual(msgs[1]!.ids, ['probe-1', 'probe-2', 'probe-3', 'probe-4']);
  assert.equal(log.tail, s4);
  log.close();
});

test('an append nobody waits for (withinMs) rides on the next commit others make, and is stored alone when none comes', async () => {
  const store = createEventStore(nats);
  const log = await claimPartition({ nats, store }, { partition: 6, owner: 'a' });
  // An hour: were it not taken by the immediate append's commit, this test would never end.
  const lingering = log.append([ev(20)], 3_600_000);
  const [s1, s2] = await Promise.all([lingering, log.append([ev(21)])]);
  assert.equal(s1, s2);
  const alone = await log.append([ev(22)], 5);
  assert.ok(alone > s2);
  const msgs = await partitionMessages(6);
  assert.deepEqual(msgs.map((m) => m.ids), [['claim.6.0.a'], ['probe-20', 'probe-21'], ['probe-22']]);
  log.close();
});

test('a takeover fences the old owner: its next append is refused and nothing of it lands after the claim', async () => {
  const store = createEventStore(nats);
  const old = await claimPartition({ nats, store }, { partition: 2, owner: 'old' });
  await old.append([ev(10)]);
  // The old owner is "frozen" here: it still believes it owns the partition.
  const next = await claimPartition({ nats, store }, { partition: 2, owner: 'new' });
  assert.ok(next.claimSeq > old.tail);
  await assert.rejects(old.append([ev(11)]), Fenced);
  assert.equal(old.fenced, true);
  await assert.rejects(old.append([ev(12)]), Fenced, 'once fenced, always fenced');
  await next.append([ev(13)]);
  const msgs = await partitionMessages(2);
  const claim = msgs.findIndex((m) => m.type === 'PartitionClaimed' && m.seq === next.claimSeq);
  assert.deepEqual(msgs.slice(claim + 1).flatMap((m) => m.ids), ['probe-13']);
  assert.ok(!msgs.some((m) => m.ids.includes('probe-11') || m.ids.includes('probe-12')));
  next.close();
});

test('appends in flight when the claim lands are all refused, none half-written', async () => {
  const store = createEventStore(nats);
  const old = await claimPartition({ nats, store }, { partition: 3, owner: 'old' });
  const next = await claimPartition({ nats, store }, { partition: 3, owner: 'new' });
  const results = await Promise.allSettled([old.append([ev(20)]), old.append([ev(21)]), old.append([ev(22)])]);
  assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
  for (const r of results) assert.ok((r as PromiseRejectedResult).reason instanceof Fenced);
  assert.deepEqual((await partitionMessages(3)).map((m) => m.type), ['PartitionClaimed', 'PartitionClaimed']);
  next.close();
});

test('two owners claiming at once: the later claim wins, and only its owner can append', async () => {
  const store = createEventStore(nats);
  const [a, b] = await Promise.all([claimPartition({ nats, store }, { partition: 4, owner: 'a' }), claimPartition({ nats, store }, { partition: 4, owner: 'b' })]);
  assert.notEqual(a.claimSeq, b.claimSeq);
  const [winner, loser] = a.claimSeq > b.claimSeq ? [a, b] : [b, a];
  await assert.rejects(loser.append([ev(30)]), Fenced);
  await winner.append([ev(31)]);
  const msgs = await partitionMessages(4);
  assert.deepEqual(msgs.map((m) => m.type), ['PartitionClaimed', 'PartitionClaimed', 'Commit']);
  winner.close();
});

test('a commit larger than the limit is split, in order, across commits', async () => {
  const store = createEventStore(nats);
  const log = await claimPartition({ nats, store }, { partition: 5, owner: 'a' });
  const big = (n: number): Envelope => ({ ...ev(n), data: { pad: 'x'.repeat(400_000) } });
  const seqs = await Promise.all([1, 2, 3, 4, 5].map((n) => log.append([big(100 + n)])));
  assert.ok(new Set(seqs).size >= 2, 'five 400 KB events cannot fit in one 1 MiB commit');
  const msgs = await partitionMessages(5);
  assert.deepEqual(msgs.slice(1).flatMap((m) => m.ids), ['probe-101', 'probe-102', 'probe-103', 'probe-104', 'probe-105']);
  log.close();
});
