import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestService, type Api, type TestService } from './support/service.ts';

/**
 * Read-your-writes on the write paths that skip the API's usual append: an inbound
 * request (recorded where it arrives, or routed when its endpoint has a script) and a
 * ping. A GET sent by the same client right after the 2xx must list what was written;
 * one request after the other, as a client with a kept-alive connection sends them.
 */
const TRIES = 25;

describe('read-your-writes after inbound requests and pings', () => {
  let svc: TestService;
  let api: Api;

  before(async () => {
    svc = await startTestService();
    ({ api } = await svc.createOrg('pro'));
  });
  after(async () => svc?.stop());

  async function endpointWith(body: Record<string, unknown>): Promise<{ id: string; inbound_url: string }> {
    const created = await api('POST', '/endpoints', { name: `rw-${Math.random().toString(36).slice(2, 8)}`, forward_urls: [], ...body });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.data;
  }

  async function eachInboundIsListedAtOnce(body: Record<string, unknown>) {
    const missed: string[] = [];
    for (let i = 0; i < TRIES; i++) {
      const ep = await endpointWith(body);
      const sent = await fetch(ep.inbound_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) });
      assert.equal(sent.status, 200);
      const { id } = (await sent.json()) as { id: string };
      const listed = await api('GET', `/endpoints/${ep.id}/events`);
      assert.equal(listed.status, 200);
      if (!listed.body.data.some((e: { id: string }) => e.id === id)) missed.push(id);
    }
    assert.deepEqual(missed, [], `${missed.length} of ${TRIES} accepted events were not listed by the GET right after their 200`);
  }

  test('a collect-only endpoint lists an accepted event on the next GET', async () => {
    await eachInboundIsListedAtOnce({});
  });

  test('an endpoint with a script (its requests routed after the answer) lists an accepted event on the next GET', async () => {
    await eachInboundIsListedAtOnce({ script: 'function filter(req) return true end' });
  });

  test('a ping by token is listed by the next GET of the monitor’s pings', async () => {
    const missed: number[] = [];
    const created = await api('POST', '/monitors', { name: 'rw-pings', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 3600 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const m = created.body.data;
    for (let i = 0; i < TRIES; i++) {
      const sent = await fetch(m.ping_url, { method: 'POST', body: `run ${i}` });
      assert.equal(sent.status, 200);
      await sent.arrayBuffer();
      const listed = await api('GET', `/monitors/${m.id}/pings`);
      if (!listed.body.data.some((p: { body: string }) => p.body === `run ${i}`)) missed.push(i);
    }
    assert.deepEqual(missed, [], 'pings missing from the GET right after their 200');
  });
});
