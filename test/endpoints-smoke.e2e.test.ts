import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

describe('endpoints smoke', () => {
  let svc: TestService;
  let api: Api;
  before(async () => {
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.001' });
    api = (await svc.createOrg('pro')).api;
  });
  after(() => svc.stop());

  test('receive, forward, list, replay', async () => {
    const target = await startTarget();
    const created = await api('POST', '/endpoints', { name: 'gh', forward_urls: [`${target.url}/a`, `${target.url}/b`], forward_headers: { 'X-Extra': '1' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const ep = created.body.data;
    console.log(ep);
    const bin = Buffer.from([0xff, 0x00, 0xfe, 0x41]);
    const r = await fetch(`${ep.inbound_url}?x=1`, { method: 'POST', body: bin, headers: { 'Content-Type': 'application/octet-stream', 'X-Hub': 'abc' } });
    const rb = await r.json() as any;
    console.log(r.status, rb);
    await eventually(async () => target.received.length >= 2, 10000);
    console.log(target.received.map((x) => [x.path, x.method, x.headers, x.raw]));
    const events = await eventually(async () => {
      const e = (await api('GET', `/endpoints/${ep.id}/events`)).body.data;
      return e[0]?.executions?.every((x: any) => x.status === 'success') ? e : null;
    });
    console.log(JSON.stringify(events, null, 1));
    const one = await api('GET', `/endpoints/${ep.id}/events/${rb.id}`);
    console.log(one.body);
    const replay = await api('POST', `/endpoints/${ep.id}/events/${rb.id}/replay`);
    console.log(replay.status, replay.body);
    await eventually(async () => target.received.length >= 4, 10000);
    const ex = await api('GET', `/executions/${replay.body.data.execution_ids[0]}`);
    console.log(JSON.stringify(ex.body, null, 1));
    await target.close();
  });
});
