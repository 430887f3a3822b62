import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { parsePrometheusText, sampleValue, type Family } from './support/prometheus-text.ts';
import { eventually, startTestService, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

/**
 * `jetcron_consumer_lag` across processes: the API (with the scheduler, dispatcher and
 * notifier) runs in this process, the projector in a child `serve --roles projector`
 * of its own (no process group, so nothing is shared but NATS and Postgres). The API's
 * /metrics shows the projector's lag at 0, rising while the projector is killed and
 * events arrive, and back to 0 once a new projector process has caught up.
 */

const TASKS = 5;

test('the projector lag seen from the API process rises while the projector is down and falls once it runs again', { timeout: 120_000 }, async (t) => {
  let svc: TestService | undefined;
  const children: JetcronProcess[] = [];
  const target = await startTarget();
  let failed = true;
  t.after(async () => {
    if (failed) for (const c of children) process.stderr.write(`${c.lines.slice(-30).join('\n')}\n`);
    await Promise.all(children.map((c) => c.cleanup()));
    await svc?.stop();
    await target.close();
  });

  svc = await startTestService({ JETCRON_ROLES: 'api,scheduler,dispatcher,notifier' });
  const s = svc;
  const startProjector = async (label: string) => {
    const p = await spawnJetcron({ roles: 'projector', natsUrl: s.natsUrl, databaseUrl: s.databaseUrl, label, env: { JETCRON_METRICS_PORT: '0' } });
    children.push(p);
    return p;
  };
  const scrape = async (url: string): Promise<Map<string, Family>> => parsePrometheusText(await (await fetch(url)).text());
  const lag = async (consumer: string) => sampleValue(await scrape(`${s.url}/metrics`), 'jetcron_consumer_lag', { consumer });
  const { api } = await s.createOrg();
  const createTasks = async (tag: string) => {
    for (let i = 0; i < TASKS; i++) assert.equal((await api('POST', '/tasks', { url: `${target.url}/${tag}-${i}` })).status, 201);
  };

  const first = await startProjector('projector-1');
  // The child's own registry, on its own port: process metrics, none of the API's gauges.
  const ownUrl = await eventually(async () => first.lines.map((l) => /metrics of this process \(projector\) at ([^\s"]+)/.exec(l)?.[1]).find(Boolean), 30_000);
  const own = await scrape(ownUrl);
  assert.equal(own.get('jetcron_process_cpu_user_seconds_total')?.type, 'counter');
  assert.equal(own.has('jetcron_consumer_lag'), false);
  assert.equal(own.has('jetcron_timers_pending'), false);

  await createTasks('before');
  await eventually(async () => target.received.length === TASKS, 20_000);
  await eventually(async () => (await lag('projector')) === 0, 20_000);

  await first.kill9();
  await createTasks('while-down');
  // The tasks still run (the partition owners are up): only the projector falls behind.
  await eventually(async () => target.received.length === 2 * TASKS, 20_000);
  const behind = await eventually(async () => {
    const [projector, notifier] = [await lag('projector'), await lag('notifier')];
    // At least one TaskCreated per task, none of them projected.
    return projector !== undefined && projector >= TASKS && notifier === 0 && projector;
  }, 20_000);

  await startProjector('projector-2');
  // It takes the lease once the killed one's has expired (10 s), then catches up.
  await eventually(async () => (await lag('projector')) === 0, 60_000);
  assert.ok(behind >= TASKS);
  failed = false;
});
