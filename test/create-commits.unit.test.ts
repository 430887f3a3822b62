import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { createCommits } from '../src/commands/task/create-commits.ts';
import { decideTask } from '../src/commands/task/decide.ts';
import type { TaskEvent } from '../src/commands/task/types.ts';
import { createdInBatch } from '../src/commands/task/load.ts';
import type { Envelope } from '../src/events/envelope.ts';
import { commitMessage, commitText } from '../src/events/commit.ts';
import { ConcurrencyError, type EventStore } from '../src/events/store.ts';
import { parentOf } from '../src/lib/ids.ts';
import { meta } from './deciders/spec.ts';

/** A store held in memory that records each message (a commit is one). */
function memoryStore() {
  const messages: Array<{ subject: string; events: Envelope[]; seq: number }> = [];
  const store: EventStore = {
    async append() {
      throw new Error('not used');
    },
    async appendCommit(subject, events, expectedSeq, texts) {
      const last = [...messages].reverse().find((m) => m.subject === subject);
      if ((last?.seq ?? 0) !== expectedSeq) throw new ConcurrencyError(subject);
      // The texts a writer gives are its events' JSON, and make the same message.
      if (texts) {
        const commit = commitMessage('c', [...events]);
        assert.equal(commitText(commit, texts), JSON.stringify(commit));
      }
      messages.push({ subject, events: [...events], seq: messages.length + 1 });
      return messages.length;
    },
    async lastMessage<E extends Envelope>(subject: string) {
      const last = [...messages].reverse().find((m) => m.subject === subject);
      return last ? { events: last.events as E[], seq: last.seq } : null;
    },
    async last() {
      return null;
    },
    async at() {
      return null;
    },
  };
  return { store, messages };
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
  assert.equal(a!.subject, SUBJECTS.batch('org_a', parentOf(id, 'cmd')!));
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

test('a commit written from its events\' texts is the commit encoded whole', () => {
  const events = [
    { type: 'TaskCreated', id: 'e1', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { s: 'quote " and \\ and \u2028 and é' } },
    { type: 'TaskCreated', id: 'e2', at: '2026-01-01T00:00:00.000Z', org_id: 'o', data: { n: [1, null, { deep: true }] }, traceparent: '00-abc-def-01' },
  ] as unknown as Envelope[];
  const commit = commitMessage('c1', events);
  assert.equal(commitText(commit, events.map((e) => JSON.stringify(e))), JSON.stringify(commit));
  assert.deepEqual(JSON.parse(commitText({ ...commit, from: 7 }, events.map((e) => JSON.stringify(e)))), { ...commit, from: 7 });
});
