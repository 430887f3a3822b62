import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CREATE_SHARDS, SUBJECTS } from '../streams/subjects.ts';
import { createCommits } from '../src/commands/task/create-commits.ts';
import { decideTask } from '../src/commands/task/decide.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { createdInBatch } from '../src/commands/task/load.ts';
import type { Envelope } from '../src/commands/envelope.ts';
import { commitBytes, commitMessage } from '../src/commands/commit.ts';
import { eventJson } from '../src/commands/upcast.ts';
import { ConcurrencyError, type EventStore } from '../src/commands/store.ts';
import { ID_PATTERN, memberId, parentOf, seqHintOf, withSeqHint } from '../src/lib/ids.ts';
import { meta } from './deciders/spec.ts';

/** A commit's bytes as text. */
const commitText = (...args: Parameters<typeof commitBytes>) => commitBytes(...args).toString('utf8');

/** A store held in memory that records each message (a commit is one). */
function memoryStore() {
  const messages: Array<{ subject: string; events: Envelope[]; seq: number }> = [];
  /** What the store reports as known: the tests move it as other writers would. */
  let known = 0;
  const store: EventStore = {
    async append() {
      throw new Error('not used');
    },
    async appendCommit(subject, events, expectedSeq, texts) {
      const last = [...messages].reverse().find((m) => m.subject === subject);
      if (expectedSeq !== undefined && (last?.seq ?? 0) !== expectedSeq) throw new ConcurrencyError(subject);
      // The texts a writer gives are its events' JSON, and make the same message.
      if (texts) {
        const commit = commitMessage('c', [...events], new Date());
        assert.equal(commitText(commit, texts), JSON.stringify(commit));
      }
      messages.push({ subject, events: [...events], seq: messages.length + 1 });
      return messages.length;
    },
    async lastMessage<E extends Envelope>(subject: string) {
      const last = [...messages].reverse().find((m) => m.subject === subject);
      return last ? { events: last.events as E[], seq: last.seq } : null;
    },
    knownSeq: () => known,
    async nextMessage<E extends Envelope>(subject: string, fromSeq: number) {
      const next = messages.find((m) => m.subject === subject && m.seq >= fromSeq);
      return next ? { events: next.events as E[], seq: next.seq } : null;
    },
    async last() {
      return null;
    },
    async at() {
      return null;
    },
  };
  return { store, messages, know: (seq: number) => void (known = seq) };
}

const decide = (orgId: string, url: string) => (taskId: string) =>
  decideTask({ type: 'CreateTask', orgId, plan: 'free', input: { url }, taskId }, null, meta()) as TaskEvent[];

test('the creates of one turn are one commit per organization, each task under an id that names its commit', async () => {
  const { store, messages } = memoryStore();
  const commits = createCommits(store);
  const made = await Promise.all([
    commits.create('org_a', decide('org_a', 'https://a.example.com/1')),
    commits.create('org_b', decide('org_b', 'https://b.example.com/1')),
    commits.create('org_a', decide('org_a', 'https://a.example.com/2')),
  ]);
  assert.equal(messages.length, 2, 'one message per organization');
  const [a, b] = messages;
  assert.deepEqual(a!.events.map((e) => (e as TaskEvent).data.task.url), ['https://a.example.com/1', 'https://a.example.com/2']);
  assert.equal(b!.events.length, 1);
  assert.equal(made[0]!.seq, a!.seq);
  assert.equal(made[2]!.seq, a!.seq);
  assert.equal(made[1]!.seq, b!.seq);
  const id = (made[2]!.events[0] as TaskEvent).data.task.id;
  assert.equal(a!.subject, SUBJECTS.creates('org_a', parentOf(id, 'cmd')!));
  assert.match(a!.subject, /^evt\.org_a\.creates\.\d+$/);
  assert.equal((await createdInBatch(store, 'org_a', id))?.data.task.url, 'https://a.example.com/2');
  assert.equal(await createdInBatch(store, 'org_b', id), null, 'another organization\'s subject does not hold it');

  // The next turn opens a new commit.
  await commits.create('org_a', decide('org_a', 'https://a.example.com/3'));
  assert.equal(messages.length, 3);
});

test('a create whose decision refuses leaves a gap, not a failed commit; a store that fails fails every create of the commit', async () => {
  const { store, messages } = memoryStore();
  const commits = createCommits(store);
  const refused = commits.create('org_a', () => {
    throw new Error('refused');
  });
  const kept = commits.create('org_a', decide('org_a', 'https://a.example.com/kept'));
  await assert.rejects(refused, /refused/);
  const { events } = await kept;
  assert.equal(messages.length, 1);
  assert.match((events[0] as TaskEvent).data.task.id, /u1$/, 'the second place of the commit');

  const failing: EventStore = { ...store, appendCommit: async () => Promise.reject(new Error('nats down')) };
  const broken = createCommits(failing);
  const results = await Promise.allSettled([broken.create('org_a', decide('org_a', 'https://x.example.com/1')), broken.create('org_a', decide('org_a', 'https://x.example.com/2'))]);
  assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
});

test('a commit closes at its size: more creates in one turn go in the next commit', async () => {
  const { store, messages } = memoryStore();
  const commits = createCommits(store);
  await Promise.all(Array.from({ length: 300 }, (_, i) => commits.create('org_a', decide('org_a', `https://a.example.com/${i}`))));
  assert.equal(messages.length, 2);
  assert.deepEqual(messages.map((m) => m.events.length), [256, 44]);
});

test('a commit written from its events\' texts (`eventJson`) is the commit encoded whole, each event with its version', () => {
  const events = [
    { type: 'TaskCreated', id: 'e1', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { s: 'quote " and \\ and \u2028 and é' } },
    { type: 'TaskCreated', id: 'e2', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { n: [1, null, { deep: true }] }, traceparent: '00-abc-def-01' },
  ] as unknown as Envelope[];
  const commit = commitMessage('c1', events, new Date());
  assert.equal(commitText(commit, events.map(eventJson)), JSON.stringify(commit));
  assert.deepEqual(JSON.parse(commitText({ ...commit, from: 7 }, events.map(eventJson))), { ...commit, from: 7 });
  assert.deepEqual(commit.events.map((e) => e.v), [1, 1]);
});

test('a commit\'s bytes, each text written once into them, are its JSON in UTF-8 (several bytes a character, one event or many)', () => {
  const events = [
    { type: 'TaskCreated', id: 'e1', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { s: 'é \u2028 \u{1F680} 日本' } },
    { type: 'TaskCreated', id: 'e2', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { s: 'plain' } },
    { type: 'TaskCreated', id: 'e3', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: {} },
  ] as unknown as Envelope[];
  for (const some of [events.slice(0, 1), events.slice(1, 2), events]) {
    const { events: stored, ...head } = commitMessage('c\u00e9', some, new Date());
    const commit = { ...head, from: 3, events: stored };
    const bytes = commitBytes(commit, some.map(eventJson));
    assert.ok(bytes.equals(Buffer.from(JSON.stringify(commit), 'utf8')), bytes.toString('utf8'));
  }
});

test('creates share a few subjects per organization: each task is found from the sequence its id names, past other commits on its subject', async () => {
  const { store, messages, know } = memoryStore();
  const commits = createCommits(store);
  const ids: string[] = [];
  // 200 turns of one create each: 200 commits, on at most CREATE_SHARDS subjects.
  for (let i = 0; i < 200; i++) {
    know(messages.length);
    const { events } = await commits.create('org_a', decide('org_a', `https://a.example.com/${i}`));
    ids.push((events[0] as TaskEvent).data.task.id);
  }
  const subjects = new Set(messages.map((m) => m.subject));
  assert.ok(subjects.size <= CREATE_SHARDS && subjects.size > 1, `${subjects.size} subjects for 200 commits`);
  for (const [i, id] of ids.entries()) {
    assert.equal(seqHintOf(parentOf(id, 'cmd')!), i, 'the id names the sequence its process knew');
    assert.equal((await createdInBatch(store, 'org_a', id))?.data.task.url, `https://a.example.com/${i}`);
  }
  // A hint far behind (a process that knew little) still finds it, by reading on.
  const late = await commits.create('org_a', decide('org_a', 'https://a.example.com/late'));
  const lateId = (late.events[0] as TaskEvent).data.task.id;
  assert.equal(seqHintOf(parentOf(lateId, 'cmd')!), 199);
  assert.equal((await createdInBatch(store, 'org_a', lateId))?.data.task.url, 'https://a.example.com/late');
  // An id naming a commit that holds no such task, or another organization's subject: none.
  const forged = `${lateId.slice(0, -1)}z`;
  assert.equal(await createdInBatch(store, 'org_a', forged), null);
  assert.equal(await createdInBatch(store, 'org_b', ids[0]!), null);
});

test('sequence hints: written after the id, read back; ids without one have none', () => {
  const id = withSeqHint('cmd_01m8bp7jdcqfek0824kbm8', 123_456_789);
  assert.match(id, ID_PATTERN);
  assert.equal(seqHintOf(id), 123_456_789);
  assert.equal(seqHintOf(memberId('tsk', id, 5).replace(/u5$/, '')), 123_456_789);
  assert.equal(parentOf(memberId('tsk', id, 5), 'cmd'), id);
  assert.equal(seqHintOf('cmd_01m8bp7jdcqfek0824kbm8'), null);
  assert.equal(seqHintOf('org_01m8bp7jdcqfek0824kbm8'), null, 'the o of a prefix is not a mark');
  assert.equal(seqHintOf(withSeqHint('cmd_x', 0)), 0);
});

test('a task created before create subjects were shared is still read from its commit\'s own subject', async () => {
  const { store } = memoryStore();
  const commitId = 'cmd_01m8bp7jdcqfek0824kbm8';
  const taskId = memberId('tsk', commitId, 3);
  const created = decide('org_a', 'https://a.example.com/old')(taskId);
  await store.appendCommit(SUBJECTS.batch('org_a', commitId), created, 0);
  assert.equal(seqHintOf(commitId), null);
  assert.equal((await createdInBatch(store, 'org_a', taskId))?.data.task.url, 'https://a.example.com/old');
});
