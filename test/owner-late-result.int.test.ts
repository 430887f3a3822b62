import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { STREAMS } from '../streams/definitions.ts';
import { taskPartition } from '../src/commands/partition/partition-of.ts';
import { eventsOf } from '../src/commands/commit.ts';
import { decodeJson } from '../src/lib/json.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { claimPartition } from '../src/owners/partition-log.ts';
import { RUNNING_VISIBLE_AFTER_MS } from '../src/dispatchers/attempt-runner.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

// An owner fenced while its request is out (another owner claimed the partition) still
// got an answer: that result is recorded on the execution's own subject, so the next
// owner settles the execution instead of sending it again, and a cancel that comes
// meanwhile does not leave a sent attempt unrecorded.

let svc: TestService;
let api: Api;
let orgId: string;
let nats: Nats;

before(async () => {
  svc = await startTestService();
  ({ api, orgId } = await svc.createOrg());
  nats = await connectNats(svc.natsUrl, 'late result test');
});
after(async () => {
  await nats?.close();
  await svc?.stop();
});

for (const slow of [false, true]) test(`a fenced owner records the result it got; the owner after it does not send that execution again${slow ? ' (its attempt outlives the running mark, which the fence refuses)' : ''}`, async () => {
  let answer!: () => void;
  const answered = new Promise<void>((r) => (answer = r));
  const target = await startTarget((req) => ({ status: 200, until: req.path === '/late' ? answered : undefined }));
  try {
    const created = await api('POST', '/tasks', { url: `${target.url}/late` });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const task = created.body.data;
    await eventually(() => target.received.length === 1 || null, 30_000, 20);
    // Another owner claims the partition while the request is out: the sender is fenced.
    const partition = taskPartition({ org_id: orgId, id: task.id, lane: null }, 8);
    const fencer = await claimPartition({ nats, store: createEventStore(nats) }, { partition, owner: 'test-fencer' });
    fencer.close();
    // Held past RUNNING_VISIBLE_AFTER_MS after the claim: the sender's "running" mark is
    // then appended after the claim and refused (were the claim itself that slow, the mark
    // went in before it, and this is the case above).
    if (slow) await new Promise((r) => setTimeout(r, RUNNING_VISIBLE_AFTER_MS * 2));
    answer();

    const own = await eventually(async () => {
      const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { last_by_subj: SUBJECTS.execution(orgId, task.last_execution_id) }).catch(() => null);
      return msg ? eventsOf(decodeJson<unknown>(msg.data)) : null;
    }, 30_000, 50);
    assert.equal(own[0]!.type, 'AttemptFinished', 'the late result is on the execution\'s subject');
    const exe = await eventually(async () => {
      const row = (await api('GET', `/executions/${task.last_execution_id}`)).body.data;
      return row?.status === 'success' ? row : null;
    }, 30_000, 100);
    assert.equal(exe.attempt, 1);
    // The sender's lease still holds: it claims again, reads the late result, and sends nothing more.
    await eventually(async () => {
      const probe = await api('POST', '/tasks', { url: `${target.url}/probe` });
      const id = probe.body.data.last_execution_id;
      return eventually(async () => ((await api('GET', `/executions/${id}`)).body.data?.status === 'success' ? true : null), 30_000, 100);
    }, 60_000, 100);
    assert.deepEqual(target.received.filter((r) => r.path === '/late').length, 1, 'sent once');
  } finally {
    await target.close();
  }
});
