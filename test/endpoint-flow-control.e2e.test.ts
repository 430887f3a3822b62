import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startGateTarget } from './support/gate-target.ts';
import { startTarget } from './support/target.ts';

// An endpoint's flow control (the contract's "Flow control"): the key is the endpoint,
// its forwards keep the limits; `rate` combines with `use_lane`, `parallelism` needs
// `use_lane: false`. Checked by order and count, never by time.

let svc: TestService;
let api: Api;

before(async () => {
  svc = await startTestService();
  api = (await svc.createOrg()).api;
});
after(async () => {
  await svc?.stop();
});

async function endpoint(body: Record<string, unknown>): Promise<{ id: string; inbound_url: string; flow_control: unknown }> {
  const res = await api('POST', '/endpoints', { name: 'limited', ...body });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.data;
}

async function send(url: string, i: number): Promise<string> {
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ i }) });
  assert.equal(res.status, 200);
  return ((await res.json()) as { id: string }).id;
}

const deliveries = (endpointId: string, n: number) =>
  eventually(async () => {
    const rows = (await api('GET', `/endpoints/${endpointId}/events?limit=100`)).body.data as Array<{ executions: Array<{ id: string; status: string }> }>;
    const ids = rows.flatMap((r) => r.executions.map((e) => e.id));
    if (ids.length < n) return null;
    const all = await Promise.all(ids.map(async (id) => (await api('GET', `/executions/${id}`)).body.data));
    return all.every((e) => e.status === 'success') ? all : null;
  }, 60_000, 100);

test('validation: parallelism needs use_lane false, no key, one of the limits; shown on the endpoint', async () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ flow_control: { parallelism: 2 } }, 'flow_control.parallelism'],
    [{ use_lane: false, flow_control: { key: 'k', parallelism: 2 } }, 'flow_control.key'],
    [{ use_lane: false, flow_control: {} }, 'flow_control'],
    [{ use_lane: false, flow_control: { rate: 0 } }, 'flow_control.rate'],
  ];
  for (const [body, field] of cases) {
    const res = await api('POST', '/endpoints', { name: 'bad', ...body });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.field, field, JSON.stringify(res.body));
  }
  const laned = await endpoint({ flow_control: { rate: 5 } });
  assert.deepEqual(laned.flow_control, { parallelism: null, rate: 5, period: '1s' });
  const back = await api('PUT', `/endpoints/${laned.id}`, { flow_control: { parallelism: 3 } });
  assert.equal(back.body.error?.field, 'flow_control.parallelism', 'a lane still');
  const opened = await api('PUT', `/endpoints/${laned.id}`, { use_lane: false, flow_control: { parallelism: 3 } });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  assert.deepEqual(opened.body.data.flow_control, { parallelism: 3, rate: null, period: '1s' });
});

test('parallelism: an endpoint without a lane forwards at most N at once, and reaches N', async () => {
  const N = 2;
  const target = await startGateTarget((_req, open) => {
    if (open >= N) setTimeout(releaseOldest, 30);
  });
  let answered = 0;
  const releaseOldest = () => target.received[answered++]?.release();
  try {
    const ep = await endpoint({ forward_urls: [`${target.url}/fwd`], use_lane: false, flow_control: { parallelism: N } });
    for (let i = 0; i < 8; i++) await send(ep.inbound_url, i);
    await eventually(() => target.received.length === 8, 60_000, 20);
    target.releaseAll();
    await deliveries(ep.id, 8);
    assert.equal(target.maxOpen(), N);
  } finally {
    await target.close();
  }
});

test('rate with a lane: one at a time in arrival order, and never more starts than the rate in any window', async () => {
  const RATE = 3;
  const received: number[] = [];
  const target = await startTarget((req) => {
    received.push(JSON.parse(req.body).i);
    return { status: 200 };
  });
  try {
    const ep = await endpoint({ forward_urls: [`${target.url}/paced`], flow_control: { rate: RATE, period: '1s' } });
    for (let i = 0; i < 8; i++) await send(ep.inbound_url, i);
    const rows = await deliveries(ep.id, 8);
    assert.deepEqual(received, [0, 1, 2, 3, 4, 5, 6, 7]);
    const starts = rows.map((r) => Date.parse(r.started_at)).sort((a, b) => a - b);
    for (let i = 0; i + RATE < starts.length; i++) assert.ok(starts[i + RATE]! - starts[i]! >= 1000, `${RATE + 1} starts within ${starts[i + RATE]! - starts[i]!} ms`);
  } finally {
    await target.close();
  }
});
