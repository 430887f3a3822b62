/** Bulk retry jobs: `POST /executions/retry`, `/jobs` (issue 36, stage 3). */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiClient, eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';
import { spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { endProcesses } from './support/owner-processes.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import { connectNats } from '../src/nats/connection.ts';
import { createEventStore } from '../src/nats/event-store.ts';
import { lastTaskEventAt } from '../src/commands/task/load.ts';
import { evolveTask } from '../src/commands/task/decide.ts';
import { decideGroupTrigger } from '../src/commands/execution/retry.ts';
import { commandMeta } from '../src/commands/execute.ts';
import type { ExecutionEvent } from '../src/commands/execution/types.ts';
import type { RetryIds } from '../src/commands/task/types.ts';
import { derivedId } from '../src/lib/ids.ts';
import { taskPartition } from '../src/commands/partition/partition-of.ts';

/**
 * Groups of 5 in the crash tests: a group of 1,000 is one commit, and the 600 of a set
 * would be taken in one before the test could kill or freeze the process mid-job.
 */
const SMALL_GROUPS = { JETCRON_JOB_GROUP: '5' };
/** The test service's task partitions (`JETCRON_PARTITIONS` unset). */
const PARTITIONS = 8;
import { createClock } from '../src/lib/clock.ts';

const FINAL = ['success', 'failed', 'timeout', 'cancelled'];
/** A set of many groups of 5 (`SMALL_GROUPS`). */
const SET = 600;

/** Every execution of the organization (all pages). */
async function allExecutions(api: Api, query = ''): Promise<any[]> {
  // By offset while executions are created and change: a row can move from one page to
  // the next and be read twice (and another missed). Each is kept once; callers that need
  // them all wait until the count is right.
  const out = new Map<string, any>();
  for (let offset = 0; ; offset += 100) {
    const res = await api('GET', `/executions?limit=100&offset=${offset}${query}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    for (const r of res.body.data) out.set(r.id, r);
    if (!res.body.has_more) return [...out.values()];
  }
}

/** `count` tasks answered 410 (a 4xx: no host backoff, no retry), each ended failed; their executions' ids. */
async function deadLetters(api: Api, url: string, count: number, key: string): Promise<string[]> {
  const res = await api('POST', '/tasks/batch', { flow_control: { key, parallelism: 50 }, tasks: Array.from({ length: count }, (_, i) => ({ url: `${url}?n=${i}` })) });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return eventually(async () => {
    const rows = (await allExecutions(api, '&dead=true')).filter((r) => r.task.url.startsWith(url));
    return rows.length === count ? rows.map((r) => r.id as string) : null;
  }, 60_000);
}

/** Each execution of `set` has exactly one retry (no execution of the set retried twice, none forgotten). */
async function retriedOnceEach(api: Api, set: string[]): Promise<void> {
  const rows = await allExecutions(api);
  const retries = new Map<string, number>();
  for (const r of rows) if (r.retry_of) retries.set(r.retry_of, (retries.get(r.retry_of) ?? 0) + 1);
  for (const id of set) assert.equal(retries.get(id) ?? 0, 1, `${id} retried once`);
}

const finishedJob = (api: Api, id: string) =>
  eventually(async () => {
    const res = await api('GET', `/jobs/${id}`);
    return res.body.data?.status === 'done' ? res.body.data : null;
  }, 60_000);

describe('bulk retry jobs', () => {
  let svc: TestService;
  let api: Api;
  let other: Api;
  let target: Awaited<ReturnType<typeof startTarget>>;
  let failing = true;

  before(async () => {
    svc = await startTestService();
    api = (await svc.createOrg('pro')).api;
    other = (await svc.createOrg('pro')).api;
    target = await startTarget(() => (failing ? { status: 410, body: 'gone' } : { status: 200, body: 'ok' }));
  });
  after(async () => {
    await target?.close();
    await svc?.stop();
  });

  test('dry_run counts; a job retries each dead letter once, oldest first; the same bulk retry again retries nothing', async () => {
    const set = await deadLetters(api, `${target.url}/bulk`, 30, 'bulk');
    failing = false;
    const filter = { host: new URL(target.url).hostname };
    const counted = await api('POST', '/executions/retry', { filter, dry_run: true });
    assert.equal(counted.status, 200, JSON.stringify(counted.body));
    assert.deepEqual(counted.body.data, { count: 30 });

    const accepted = await api('POST', '/executions/retry', { filter }, { 'Idempotency-Key': 'bulk-once' });
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    const job = accepted.body.data;
    assert.match(job.id, /^rjb_/);
    assert.equal(job.kind, 'retry');
    assert.equal(job.total, 30);
    assert.deepEqual(job.filter, { dead: true, ...filter });
    const again = await api('POST', '/executions/retry', { filter }, { 'Idempotency-Key': 'bulk-once' });
    assert.equal(again.body.data.id, job.id, 'the same Idempotency-Key answers the same job');
    assert.deepEqual((await api('GET', '/jobs')).body.data.filter((j: any) => j.status === 'running' || j.id === job.id).map((j: any) => j.id), [job.id], 'and makes no second job');

    const done = await finishedJob(api, job.id);
    assert.equal(done.done, 30);
    assert.equal(done.skipped, 0);
    assert.ok(done.finished_at);
    await eventually(async () => (await allExecutions(api)).filter((r) => r.retry_of && r.status === 'success').length === 30, 60_000);
    await retriedOnceEach(api, set);

    // Nothing is dead any more: the same call counts none and its job retries nothing.
    assert.deepEqual((await api('POST', '/executions/retry', { filter, dry_run: true })).body.data, { count: 0 });
    const second = await api('POST', '/executions/retry', { filter });
    assert.equal(second.status, 202);
    assert.equal(second.body.data.total, 0);
    assert.equal(second.body.data.status, 'done');
    await retriedOnceEach(api, set);

    const jobs = (await api('GET', '/jobs')).body.data.map((j: any) => j.id);
    assert.deepEqual(jobs.slice(0, 2), [second.body.data.id, job.id], 'newest first');
  });

  test('filters are checked naming filter.<name>; a finished job stays as it is when cancelled; another organization: 404', async () => {
    const bad = await api('POST', '/executions/retry', { filter: { status_code: '6xx' } });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.field, 'filter.status_code');
    const badTime = await api('POST', '/executions/retry', { filter: { finished_after: 'yesterday' } });
    assert.equal(badTime.status, 400);
    assert.equal(badTime.body.error.field, 'filter.finished_after');
    const unknown = await api('POST', '/executions/retry', { filter: { colour: 'red' } });
    assert.equal(unknown.status, 422);
    const job = (await api('POST', '/executions/retry', { filter: { error: 'no such error anywhere' } })).body.data;
    assert.equal(job.status, 'done');
    const cancelled = await api('POST', `/jobs/${job.id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.data.status, 'done', 'a finished job stays as it is');
    assert.equal((await other('GET', `/jobs/${job.id}`)).status, 404);
    assert.equal((await other('POST', `/jobs/${job.id}/cancel`)).status, 404);
    assert.deepEqual((await other('GET', '/jobs')).body.data, []);
  });

  test('a bulk replay of an endpoint\'s failed events: to the chosen URL only, each delivery retry_of the one it replaces, and not again', async () => {
    let aFails = true;
    const replayTarget = await startTarget((req) => (aFails && req.path.startsWith('/r/a') ? { status: 410, body: 'gone' } : { status: 200, body: 'ok' }));
    try {
      const [a, b] = [`${replayTarget.url}/r/a`, `${replayTarget.url}/r/b`];
      const created = await api('POST', '/endpoints', { name: 'replayed', forward_urls: [a, b], retry_attempts: 0 });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const ep = created.body.data;
      for (const [method, body] of [['POST', '{"n":1}'], ['POST', '{"n":2}'], ['POST', '{"n":3}'], ['PUT', '{"n":4}']] as const) {
        const sent = await fetch(ep.inbound_url, { method, body, headers: { 'Content-Type': 'application/json' } });
        assert.equal(sent.status, 200);
      }
      const deliveries = await eventually(async () => {
        const rows = await allExecutions(api, `&endpoint_id=${ep.id}`);
        return rows.length === 8 && rows.every((r) => FINAL.includes(r.status)) ? rows : null;
      }, 60_000);
      const failedA = deliveries.filter((r) => r.task.url === a);
      assert.ok(failedA.every((r) => r.status === 'failed'));
      const filter = { delivery_status: 'failed', method: 'post' };
      assert.deepEqual((await api('POST', `/endpoints/${ep.id}/events/replay`, { filter, dry_run: true })).body.data, { count: 3 });

      const bad = await api('POST', `/endpoints/${ep.id}/events/replay`, { filter: { delivery_status: 'broken' } });
      assert.equal(bad.status, 422);
      assert.equal(bad.body.error.field, 'filter.delivery_status');
      const badTime = await api('POST', `/endpoints/${ep.id}/events/replay`, { filter: { received_after: 'soon' } });
      assert.equal(badTime.status, 400);
      assert.equal(badTime.body.error.field, 'filter.received_after');
      const unknownUrl = await api('POST', `/endpoints/${ep.id}/events/replay`, { filter, forward_urls: ['http://elsewhere.example/x'] });
      assert.equal(unknownUrl.status, 422);
      assert.equal(unknownUrl.body.error.field, 'forward_urls');
      assert.equal((await other('POST', `/endpoints/${ep.id}/events/replay`, { filter })).status, 404);

      aFails = false;
      const receivedB = replayTarget.received.filter((r) => r.path.startsWith('/r/b')).length;
      const accepted = await api('POST', `/endpoints/${ep.id}/events/replay`, { filter, forward_urls: [a] }, { 'Idempotency-Key': 'replay-once' });
      assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
      const again = await api('POST', `/endpoints/${ep.id}/events/replay`, { filter, forward_urls: [a] }, { 'Idempotency-Key': 'replay-once' });
      assert.equal(again.body.data.id, accepted.body.data.id, 'the same Idempotency-Key answers the same job');
      assert.equal((await api('GET', '/jobs')).body.data.filter((j: any) => j.kind === 'replay').length, 1, 'and makes no second job');
      assert.equal(accepted.body.data.kind, 'replay');
      assert.equal(accepted.body.data.endpoint_id, ep.id);
      assert.deepEqual(accepted.body.data.forward_urls, [a]);
      const done = await finishedJob(api, accepted.body.data.id);
      assert.deepEqual([done.total, done.done, done.skipped], [3, 3, 0]);
      const replays = await eventually(async () => {
        const rows = (await allExecutions(api, `&endpoint_id=${ep.id}`)).filter((r) => r.retry_of);
        return rows.length === 3 && rows.every((r) => r.status === 'success') ? rows : null;
      }, 60_000);
      const posted = failedA.filter((r) => !replayTarget.received.some((q) => q.method === 'PUT' && q.headers['x-jetcron-execution-id'] === r.id));
      assert.deepEqual(replays.map((r) => r.retry_of).sort(), posted.map((r) => r.id).sort(), 'each replay retries the event\'s delivery to that URL');
      assert.ok(replays.every((r) => r.task.url === a));
      assert.equal(replayTarget.received.filter((r) => r.path.startsWith('/r/b')).length, receivedB, 'nothing to the URL not chosen');
      // Their failures are replaced: the same replay finds nothing.
      assert.deepEqual((await api('POST', `/endpoints/${ep.id}/events/replay`, { filter, dry_run: true })).body.data, { count: 0 });
    } finally {
      await replayTarget.close();
    }
  });

  // A group's triggers are decided on each task as read and committed on the jobs
  // subject: a delete or an update between that read and the commit, through the real
  // log, owners and projector (the commit is written here, as the worker writes one).
  test('a trigger committed on the jobs subject after its task\'s delete is never sent and leaves no row; one after an update sends the task as it was read', async () => {
    const { orgId, api: own } = await svc.createOrg('pro');
    const create = async (name: string) => {
      const res = await own('POST', '/tasks', { url: `${target.url}/read-${name}`, delay: '1d', name });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.data.id as string;
    };
    const [keptId, goneId] = [await create('kept'), await create('gone')];
    const nats = await connectNats(svc.natsUrl, 'retry-jobs test');
    try {
      const store = createEventStore(nats);
      const read = async (id: string) => {
        const last = (await lastTaskEventAt(store, orgId, id))!;
        return { state: evolveTask(null, last.event), seq: last.seq };
      };
      const [kept, gone] = [await read(keptId), await read(goneId)];
      assert.equal((await own('PUT', `/tasks/${keptId}`, { url: `${target.url}/read-kept-changed` })).status, 200);
      assert.equal((await own('DELETE', `/tasks/${goneId}`)).status, 204);
      const ids = (n: number) => ({ eventId: derivedId('evt', Date.now(), 'jobs-subject-test', n), executionId: derivedId('exe', Date.now(), 'jobs-subject-test', n) });
      const [keptIds, goneIds] = [ids(1), ids(2)];
      const trigger = (id: string, source: typeof kept, at: RetryIds) =>
        decideGroupTrigger({ type: 'TriggerTask', taskId: id, retryOf: `exe_earlier_${id}`, callbackUrl: null }, source, at, commandMeta(createClock()));
      const seq = await store.appendCommit(SUBJECTS.jobs(orgId), [trigger(keptId, kept, keptIds), trigger(goneId, gone, goneIds)], undefined);

      // The deleted task's run: its cancellation recorded by its owner (on its partition's log), reason and all.
      const cancelled = await eventually(async () => {
        for (let from = seq + 1; ;) {
          const msg = await store.nextMessage!<ExecutionEvent>(SUBJECTS.partition(taskPartition(gone.state!, PARTITIONS)), from);
          if (!msg) return null;
          const hit = msg.events.find((e) => e.type === 'ExecutionCancelled' && e.data.execution_id === goneIds.executionId);
          if (hit) return hit;
          from = msg.seq + 1;
        }
      });
      assert.equal((cancelled.data as { reason?: string }).reason, 'task deleted');
      await eventually(() => target.received.some((r) => r.path === '/read-kept'));
      assert.deepEqual(target.received.filter((r) => r.path.startsWith('/read-')).map((r) => r.path), ['/read-kept'], 'the updated task\'s run as it was read; nothing of the deleted one');
      const keptRow = await eventually(async () => {
        const res = await own('GET', `/executions/${keptIds.executionId}`);
        return res.status === 200 && res.body.data.status !== 'pending' && res.body.data;
      });
      assert.equal(keptRow.retry_of, `exe_earlier_${keptId}`);
      assert.equal((await own('GET', `/executions/${goneIds.executionId}`)).status, 404, 'no row for the deleted task\'s run');
      assert.equal((await own('GET', `/tasks/${goneId}`)).status, 404, 'the deleted task is not brought back');
      assert.equal((await own('GET', `/tasks/${keptId}`)).body.data.url, `${target.url}/read-kept-changed`, 'the task keeps its update');
    } finally {
      await nats.close();
    }
  });

  test('a rebuild of the read models gives the same jobs', async () => {
    const jobs = async () => {
      const res = await api('GET', '/jobs');
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const list = res.body.data as any[];
      return {
        list,
        one: await Promise.all(list.map(async (j) => {
          const one = await api('GET', `/jobs/${j.id}`);
          assert.equal(one.status, 200, JSON.stringify(one.body));
          return one.body.data;
        })),
      };
    };
    // The executions too: a job's retries are in its groups' commits on the jobs subject, read by the rebuild as live.
    const executions = async () => (await allExecutions(api)).map((r) => ({ id: r.id, status: r.status, retry_of: r.retry_of, retried_by: r.retried_by, url: r.task?.url ?? null }))
      .sort((a, b) => a.id.localeCompare(b.id));
    const before = await jobs();
    const rowsBefore = await executions();
    assert.ok(before.list.length >= 2);
    assert.ok(rowsBefore.filter((r) => r.retry_of).length >= 30, 'the jobs\' retries are among the rows');
    await svc.stopService();
    await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
    await svc.startService();
    assert.deepEqual(await jobs(), before);
    assert.deepEqual(await executions(), rowsBefore);
  });
});

// A service of its own: 10,001 executions waiting a day would weigh on the other tests' restart.
describe('a bulk retry matching more than 10,000 executions', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService();
  });
  after(async () => {
    await svc?.stop();
  });

  test('more than 10,000 matching executions: 422 field filter naming the count, and no job', async () => {
    const { api: big } = await svc.createOrg('pro');
    // Pending a day from now: 10,001 executions that send nothing.
    for (let b = 0; b < 11; b++) {
      const size = b < 10 ? 1000 : 1;
      const res = await big('POST', '/tasks/batch', { delay: '1d', flow_control: { key: 'later', parallelism: 1000 }, tasks: Array.from({ length: size }, (_, i) => ({ url: `http://127.0.0.1:9/later?b=${b}&i=${i}` })) });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const filter = { dead: false, status: 'pending' };
    assert.deepEqual((await big('POST', '/executions/retry', { filter, dry_run: true })).body.data, { count: 10_001 });
    const refused = await big('POST', '/executions/retry', { filter });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error.field, 'filter');
    assert.match(refused.body.error.message, /10001 executions/);
    assert.deepEqual((await big('GET', '/jobs')).body.data, []);
  });

});

describe('a bulk retry job across a kill -9 of the process advancing it', () => {
  let svc: TestService;
  const procs: JetcronProcess[] = [];
  let target: Awaited<ReturnType<typeof startTarget>>;
  let failing = true;

  before(async () => {
    // The test's own service never takes the job: the children (each an API and a standby projector, beside which the worker runs) do.
    svc = await startTestService({ JETCRON_RETRY_JOBS: '0' });
    target = await startTarget(() => (failing ? { status: 410, body: 'gone' } : { status: 200, body: 'ok' }));
  });
  after(async () => {
    await endProcesses(procs);
    await target?.close();
    await svc?.stop();
  });

  test('one running job per organization, a cancel; killed part-way, a job finishes in another process and no execution of its set is retried twice', async () => {
    const { api, apiKey } = await svc.createOrg('pro');
    // Many groups (of 5, `SMALL_GROUPS`): the kill can land inside a group or between two.
    const set = await deadLetters(api, `${target.url}/crash`, SET, 'crash');
    failing = false;
    // No process advances jobs yet: one accepted now stays running.
    const waiting = await api('POST', '/executions/retry', { filter: {} });
    assert.equal(waiting.status, 202, JSON.stringify(waiting.body));
    assert.equal(waiting.body.data.status, 'running');
    const another = await api('POST', '/executions/retry', { filter: { source_type: 'task' } });
    assert.equal(another.status, 409, 'one running job per organization');
    const cancelled = await api('POST', `/jobs/${waiting.body.data.id}/cancel`);
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.deepEqual([cancelled.body.data.status, cancelled.body.data.done, cancelled.body.data.skipped], ['cancelled', 0, 0]);
    assert.ok(cancelled.body.data.finished_at);
    const first = await spawnJetcron({ roles: 'api,projector', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label: 'jobs-a', env: SMALL_GROUPS });
    procs.push(first);
    const viaFirst = apiClient(() => first.url!, apiKey);
    const accepted = await viaFirst('POST', '/executions/retry', { filter: {} });
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    const jobId = accepted.body.data.id;
    assert.equal(accepted.body.data.total, SET);
    // Killed once it has recorded a group (its progress projected), mid-job unless the machine lets it run through first.
    await eventually(async () => (await api('GET', `/jobs/${jobId}`)).body.data.done > 0, 60_000, 10);
    await first.kill9();
    const atKill = (await api('GET', `/jobs/${jobId}`)).body.data;
    const second = await spawnJetcron({ roles: 'api,projector', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label: 'jobs-b', env: SMALL_GROUPS });
    procs.push(second);
    const done = await finishedJob(api, jobId);
    // Every execution counted as retried: those the killed process retried without recording them too.
    assert.deepEqual([done.done, done.skipped], [SET, 0]);
    await eventually(async () => (await allExecutions(api)).filter((r) => r.retry_of && FINAL.includes(r.status)).length >= SET, 60_000);
    await retriedOnceEach(api, set);
    // Informational: how far the first process had come (the kill can land after its last group on a fast machine).
    process.stderr.write(`# killed at ${atKill.done + atKill.skipped}/${SET} recorded; finished ${done.done} retried, ${done.skipped} skipped\n`);
  });

  test('the process advancing a job frozen past its lease (SIGSTOP), then resumed: another finishes the job, the frozen one appends nothing more, none retried twice', { timeout: 240_000 }, async () => {
    // The last test's processes hold nothing any more: the one started here takes the job.
    await endProcesses(procs.splice(0));
    const { api, apiKey } = await svc.createOrg('pro');
    failing = true;
    const set = await deadLetters(api, `${target.url}/freeze`, SET, 'freeze');
    failing = false;
    const frozen = await spawnJetcron({ roles: 'api,projector', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label: 'jobs-frozen', env: SMALL_GROUPS });
    procs.push(frozen);
    const accepted = await apiClient(() => frozen.url!, apiKey)('POST', '/executions/retry', { filter: { host: new URL(target.url).hostname } });
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    const jobId = accepted.body.data.id;
    assert.equal(accepted.body.data.total, SET);
    await eventually(async () => (await api('GET', `/jobs/${jobId}`)).body.data.done > 0, 60_000, 10);
    process.kill(frozen.pid, 'SIGSTOP');
    const atFreeze = (await api('GET', `/jobs/${jobId}`)).body.data;
    // The successor takes the lease once the frozen one's lapses.
    const successor = await spawnJetcron({ roles: 'api,projector', natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, label: 'jobs-successor', env: SMALL_GROUPS });
    procs.push(successor);
    let done;
    try {
      await eventually(() => successor.lines.some((l) => /bulk jobs: this process holds their lease and advances them/.test(l)), 60_000, 100);
      done = await finishedJob(api, jobId);
    } finally {
      process.kill(frozen.pid, 'SIGCONT');
    }
    // Woken, it finds its lease lapsed and stops; whatever it had under way is settled (appended before the freeze, or refused).
    await eventually(() => frozen.lines.some((l) => /bulk jobs: their lease is no longer held; this holder has stopped/.test(l)), 60_000, 100);
    assert.deepEqual([done.done, done.skipped], [SET, 0]);
    const rows = await eventually(async () => {
      const all = await allExecutions(api);
      return all.filter((r) => r.retry_of && set.includes(r.retry_of) && FINAL.includes(r.status)).length >= SET ? all : null;
    }, 60_000).catch(async (err: Error) => {
      // Which retries never ended, to tell a stranded execution from a retry never made.
      const retries = (await allExecutions(api)).filter((r) => r.retry_of && set.includes(r.retry_of));
      const byStatus = Object.fromEntries([...new Set(retries.map((r) => r.status))].map((st) => [st, retries.filter((r) => r.status === st).length]));
      throw new Error(`${err.message}: ${retries.length} retries of ${new Set(retries.map((r) => r.retry_of)).size} executions, by status ${JSON.stringify(byStatus)}; not final, e.g. ${JSON.stringify(retries.filter((r) => !FINAL.includes(r.status)).slice(0, 2))}`);
    });
    assert.ok(rows.length > 0);
    await retriedOnceEach(api, set);
    process.stderr.write(`# frozen at ${atFreeze.done + atFreeze.skipped}/${SET} recorded\n`);
  });
});
