import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { startNatsCluster, type NatsCluster } from './support/nats-cluster.ts';
import { startTestService, type TestService } from './support/service.ts';

// A start while JetStream cannot answer (two of three nodes down: no quorum, no leaders)
// waits, logs each try and comes up once the cluster is back, instead of exiting.
let cluster: NatsCluster | undefined;
let svc: TestService | undefined;
after(async () => {
  await svc?.stop().catch(() => {});
  await cluster?.stop();
});

test('a start during a NATS leader election retries with a log line, then serves', { timeout: 90_000 }, async () => {
  cluster = await startNatsCluster();
  await cluster.kill(1);
  await cluster.kill(2);
  const logs: string[] = [];
  let settled = false;
  const starting = startTestService({ JETCRON_STREAM_REPLICAS: '3' }, { natsUrl: cluster.nodes[0]!.url, log: (m) => logs.push(m) })
    .finally(() => (settled = true));
  // Let it fail a few times against a cluster without quorum.
  const deadline = Date.now() + 20_000;
  while (!logs.some((l) => /^start: .* failed .* retrying in/.test(l)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.ok(logs.some((l) => /^start: .* failed .* retrying in/.test(l)), `no retry line: ${logs.join(' | ')}`);
  assert.equal(settled, false, 'the start gave up (or claimed success) without JetStream');
  await Promise.all([cluster.restart(1), cluster.restart(2)]);
  svc = await starting;
  assert.ok(logs.some((l) => /^start: .* succeeded after \d+ tries/.test(l)), logs.join(' | '));
  const res = await fetch(`${svc.url}/healthz`);
  assert.equal(res.status, 200, await res.text());
  const { api } = await svc.createOrg('pro');
  assert.equal((await api('POST', '/tasks', { url: 'http://127.0.0.1:9/never', enabled: false })).status, 201);
});
