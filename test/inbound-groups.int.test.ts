/**
 * Inbound requests stored in groups (the requests to one endpoint of one loop turn in
 * one INBOUND message): a 200 still means stored, whatever happens to the API process
 * right after; and a log holding single-request messages (written before groups
 * existed) and groups routes both, in arrival order.
 *
 * Real parts only: nats-server, Postgres, `jetcron serve` as a child process (killed
 * with SIGKILL) or in this process, a local HTTP target.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { STREAMS } from '../streams/definitions.ts';
import { SUBJECTS } from '../streams/subjects.ts';
import { decodeStoredRequests, encodeStoredGroup, encodeStoredRequest, encodeWholeGroup, type InboundRequestMeta, type StoredRequest } from '../src/inbound/stored-request.ts';
import { newId } from '../src/lib/ids.ts';
import { connectNats, type Nats } from '../src/nats/connection.ts';
import { createOrgWithKey, spawnJetcron, type JetcronProcess } from './support/jetcron-process.ts';
import { startTestNats } from './support/nats.ts';
import { createTestDatabase } from './support/postgres.ts';
import { apiClient, eventually, startTestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

/** Every request INBOUND holds, in stream order, with the sequence of its message. */
async function storedRequests(nats: Nats): Promise<Array<StoredRequest & { seq: number }>> {
  const last = (await nats.jsm.streams.info(STREAMS.inbound.name)).state.last_seq;
  const out: Array<StoredRequest & { seq: number }> = [];
  for (let seq = 1; seq <= last; seq++) {
    const msg = await nats.jsm.streams.getMessage(STREAMS.inbound.name, { seq }).catch(() => null);
    if (msg) out.push(...decodeStoredRequests(msg.data, msg.header).map((r) => ({ ...r, seq })));
  }
  return out;
}

test('kill -9 of the API right after 200 answers loses no request: every answered id is stored, once, and routed after a restart', async () => {
  const natsServer = await startTestNats();
  const db = await createTestDatabase();
  const procs: JetcronProcess[] = [];
  let nats: Nats | undefined;
  try {
    // api + projector (the API key and the endpoint's slug are read from the read models); no router.
    const first = await spawnJetcron({ roles: 'api,projector', natsUrl: natsServer.url, databaseUrl: db.url, label: 'api' });
    procs.push(first);
    const org = await createOrgWithKey(natsServer.url);
    const api = apiClient(() => first.url!, org.apiKey);
    const created = await eventually(async () => {
      const r = await api('POST', '/endpoints', { name: 'killed', forward_urls: [], use_lane: false });
      return r.status === 201 ? r.body.data : undefined;
    });
    const inbound = `${first.url}/in/${created.slug}`;
    await eventually(async () => (await fetch(inbound, { method: 'POST', body: '{"warm":true}' }).catch(() => null))?.status === 200);

    // Many requests at once (so the receiver groups them), and the kill as soon as 300 have a 200.
    const answered = new Set<string>();
    let failed = 0;
    let killing: Promise<void> | undefined;
    const worker = async (w: number) => {
      for (let i = 0; !killing; i++) {
        try {
          const res = await fetch(inbound, { method: 'POST', body: JSON.stringify({ w, i, pad: 'x'.repeat(500) }), headers: { 'Content-Type': 'application/json' } });
          const body = (await res.json()) as { id?: string };
          if (res.status !== 200 || !body.id) throw new Error(`answered ${res.status}`);
          answered.add(body.id);
          if (answered.size >= 300) killing ??= first.kill9();
        } catch {
          failed++;
          if (killing) return;
        }
      }
    };
    await Promise.all(Array.from({ length: 48 }, (_, w) => worker(w)));
    await killing;
    assert.ok(first.exited(), 'the API process is gone');
    assert.ok(answered.size >= 300, `${answered.size} answered 200`);

    nats = await connectNats(natsServer.url, 'test reader');
    const stored = await storedRequests(nats);
    const storedIds = stored.map((r) => r.meta.id);
    const missing = [...answered].filter((id) => !storedIds.includes(id));
    assert.deepEqual(missing, [], `answered 200 but not stored (${answered.size} answered, ${stored.length} stored, ${failed} failed at the kill)`);
    assert.equal(new Set(storedIds).size, storedIds.length, 'no request stored twice');
    const messages = new Set(stored.map((r) => r.seq)).size;
    assert.ok(messages <= stored.length);

    // A new process with the router routes every stored request: one inbound_events row each.
    procs.push(await spawnJetcron({ roles: 'api,projector,scheduler', natsUrl: natsServer.url, databaseUrl: db.url, label: 'after' }));
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await eventually(async () => {
        const r = await client.query<{ n: string }>('SELECT count(*) AS n FROM inbound_events WHERE id = ANY($1)', [storedIds]);
        return Number(r.rows[0]!.n) === storedIds.length;
      }, 60_000, 200);
      const rows = await client.query<{ id: string; inbound_seq: string }>('SELECT id, inbound_seq FROM inbound_events');
      assert.equal(rows.rows.length, storedIds.length, 'one row per stored request, none twice');
      const seqOf = new Map(stored.map((r) => [r.meta.id, r.seq]));
      for (const row of rows.rows) assert.equal(Number(row.inbound_seq), seqOf.get(row.id), `${row.id}: the sequence of the message holding it`);
    } finally {
      await client.end();
    }
  } finally {
    await nats?.close();
    for (const p of procs) await p.cleanup();
    await db.drop();
    await natsServer.stop();
  }
});

test('a log of single-request INBOUND messages, whole groups and groups with their routes in a header routes all: every request forwarded once, in arrival order, its stored request readable and replayed alike', async () => {
  // No scheduler (so no router) until the log is written.
  const svc = await startTestService({ JETCRON_ROLES: 'api,projector' });
  const target = await startTarget(() => ({ status: 200 }));
  let nats: Nats | undefined;
  try {
    const { orgId, api } = await svc.createOrg('pro');
    const created = await api('POST', '/endpoints', { name: 'mixed', forward_urls: [`${target.url}/mixed`], use_lane: true });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const ep = created.body.data as { id: string; slug: string };
    nats = await connectNats(svc.natsUrl, 'test writer');
    const subject = SUBJECTS.inbound(orgId, ep.id);

    let n = 0;
    const request = (query = ''): StoredRequest => {
      const body = Buffer.from(JSON.stringify({ seq: n++ }));
      const now = Date.now();
      const meta: InboundRequestMeta = {
        id: newId('evt', now), org_id: orgId, endpoint_id: ep.id, method: 'POST', path: `/in/${ep.slug}`, query,
        headers: [['Content-Type', 'application/json'], ['X-Seq', String(n - 1)]], source_ip: '127.0.0.1', received_at: new Date(now).toISOString(), body_size: body.length,
      };
      return { meta, body };
    };
    const single = async () => {
      const r = request();
      await nats!.publish(subject, encodeStoredRequest(r.meta, r.body), { msgId: r.meta.id });
      return [r];
    };
    const whole = async (size: number) => {
      const rs = Array.from({ length: size }, () => request());
      await nats!.publish(subject, encodeWholeGroup(rs), { msgId: newId('cmd') });
      return rs;
    };
    const routed = async (size: number, query = '') => {
      const rs = Array.from({ length: size }, () => request(query));
      const { data, headers } = encodeStoredGroup(rs);
      assert.equal(headers !== undefined, query.length * size < 60_000, 'routes in a header unless too long for one');
      await nats!.publish(subject, data, { msgId: newId('cmd'), headers });
      return rs;
    };
    // As a log from before groups, then whole groups, then groups with their routes in a
    // header (one of them with routes too long for a header: written whole), mixed.
    const written = [
      ...await single(), ...await single(), ...await whole(4), ...await single(), ...await whole(1), ...await routed(3),
      ...await single(), ...await routed(1), ...await routed(5, `q=${'x'.repeat(13_000)}`), ...await whole(2), ...await routed(2),
    ];
    // And through the receiver, at once (grouped when they share a loop turn).
    const viaHttp = await Promise.all(Array.from({ length: 5 }, async () => {
      const res = await fetch(`${svc.url}/in/${ep.slug}`, { method: 'POST', body: JSON.stringify({ tag: 'http' }), headers: { 'Content-Type': 'application/json' } });
      assert.equal(res.status, 200);
      return ((await res.json()) as { id: string }).id;
    }));

    await svc.restart({ JETCRON_ROLES: 'api,projector,scheduler,dispatcher,notifier' });
    const total = written.length + viaHttp.length;
    await eventually(async () => target.received.length >= total, 60_000, 100);
    const eventIds = target.received.map((r) => String(r.headers['x-jetcron-event-id']));
    assert.equal(new Set(eventIds).size, total, 'each forwarded once');
    assert.deepEqual(eventIds.slice(0, written.length), written.map((r) => r.meta.id), 'the log order (use_lane)');
    assert.deepEqual(target.received.slice(0, written.length).map((r) => JSON.parse(r.body).seq), written.map((_, i) => i));
    assert.deepEqual(new Set(eventIds.slice(written.length)), new Set(viaHttp));

    const forwarded = (id: string) => target.received.filter((r) => r.headers['x-jetcron-event-id'] === id);
    // The first forward of each carries the stored request: its headers and its body.
    for (const r of written) {
      const [sent] = forwarded(r.meta.id);
      assert.equal(sent!.headers['x-seq'], r.meta.headers[1]![1], `${r.meta.id}: its headers`);
      assert.equal(sent!.body, r.body.toString('utf8'), `${r.meta.id}: its body`);
    }

    // The stored request of an event of each format, and its replay, which sends it again alike.
    const samples = [written[0]!, written[3]!, written[9]!, written[13]!, written[written.length - 1]!];
    const before = target.received.length;
    for (const r of samples) {
      const detail = await eventually(async () => {
        const res = await api('GET', `/endpoints/${ep.id}/events/${r.meta.id}`);
        return res.status === 200 ? res.body.data : undefined;
      });
      assert.equal(detail.request.body, r.body.toString('utf8'));
      assert.equal(detail.request.headers['X-Seq'], r.meta.headers[1]![1]);
      assert.equal(detail.request.query, r.meta.query);
      assert.equal((await api('POST', `/endpoints/${ep.id}/events/${r.meta.id}/replay`)).status, 202);
    }
    await eventually(async () => target.received.length >= before + samples.length, 60_000, 100);
    for (const r of samples) {
      const [first, again] = forwarded(r.meta.id);
      assert.ok(again, `${r.meta.id} replayed`);
      assert.equal(again.body, first!.body);
      assert.equal(again.headers['x-seq'], first!.headers['x-seq']);
      assert.equal(again.path, first!.path);
    }
  } finally {
    await nats?.close();
    await target.close();
    await svc.stop();
  }
});
