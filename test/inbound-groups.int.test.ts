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

for (const scripted of [false, true]) test(`kill -9 of the API right after 200 answers loses no request: every answered id is stored, once, and recorded (${scripted ? 'by the router after a restart: an endpoint with a script' : 'by the receiver: an endpoint without a script'})`, async () => {
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
      const r = await api('POST', '/endpoints', { name: 'killed', forward_urls: [], use_lane: false, ...(scripted ? { script: 'function filter(req) return true end' } : {}) });
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

    // A new process with the router routes every stored request the killed receiver had
    // not recorded itself: one inbound_events row for each answered request. A group the
    // receiver stored and was killed before recording was answered to no one: it may stay
    // unrecorded (the router passes over a group marked as the receiver's), never twice.
    procs.push(await spawnJetcron({ roles: 'api,projector,scheduler', natsUrl: natsServer.url, databaseUrl: db.url, label: 'after' }));
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      // The router's way records every stored request, answered or not.
      const awaited = scripted ? storedIds : [...answered];
      await eventually(async () => {
        const r = await client.query<{ n: string }>('SELECT count(*) AS n FROM inbound_events WHERE id = ANY($1)', [awaited]);
        return Number(r.rows[0]!.n) === awaited.length;
      }, 60_000, 200);
      const rows = await client.query<{ id: string; inbound_seq: string }>('SELECT id, inbound_seq FROM inbound_events');
      const rowIds = rows.rows.map((r) => r.id);
      assert.equal(new Set(rowIds).size, rowIds.length, 'no request recorded twice');
      const seqOf = new Map(stored.map((r) => [r.meta.id, r.seq]));
      for (const row of rows.rows) assert.equal(Number(row.inbound_seq), seqOf.get(row.id), `${row.id}: the sequence of the message holding it`);
      const unrecorded = storedIds.filter((id) => !rowIds.includes(id));
      assert.deepEqual(unrecorded.filter((id) => answered.has(id)), [], 'every answered request recorded');
      if (scripted) assert.deepEqual(unrecorded, [], 'every stored request routed');
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
    // And through the receiver, at once (grouped when they share a loop turn; recorded by
    // the receiver itself, so they may go out before the log written by hand is routed).
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
    const byHand = new Set(written.map((r) => r.meta.id));
    const routedInOrder = target.received.filter((r) => byHand.has(String(r.headers['x-jetcron-event-id'])));
    assert.deepEqual(routedInOrder.map((r) => String(r.headers['x-jetcron-event-id'])), written.map((r) => r.meta.id), 'the log order (use_lane)');
    assert.deepEqual(routedInOrder.map((r) => JSON.parse(r.body).seq), written.map((_, i) => i));
    assert.deepEqual(new Set(eventIds.filter((id) => !byHand.has(id))), new Set(viaHttp));

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

test('requests no hook touches are recorded by the receiver, no router: forwarded and listed with no scheduler running, one commit per group on a shared subject; a scripted endpoint\'s requests wait for the router', async () => {
  // No scheduler role: no router in the deployment until the restart.
  const svc = await startTestService({ JETCRON_ROLES: 'api,projector,dispatcher,notifier' });
  const target = await startTarget(() => ({ status: 200 }));
  let nats: Nats | undefined;
  try {
    const { orgId, api } = await svc.createOrg('pro');
    const plain = (await api('POST', '/endpoints', { name: 'plain', forward_urls: [`${target.url}/plain`, `${target.url}/plain-2`], use_lane: false })).body.data as { id: string; slug: string };
    const scripted = (await api('POST', '/endpoints', {
      name: 'scripted', forward_urls: [`${target.url}/scripted`], use_lane: false,
      script: 'function filter(req)\n  return true\nend',
    })).body.data as { id: string; slug: string };
    const send = async (slug: string, i: number) => {
      const res = await fetch(`${svc.url}/in/${slug}`, { method: 'POST', body: JSON.stringify({ i }), headers: { 'Content-Type': 'application/json' } });
      assert.equal(res.status, 200);
      return ((await res.json()) as { id: string }).id;
    };
    // At once, so the receiver groups them.
    const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => send(plain.slug, i)));
    await eventually(async () => target.received.filter((r) => r.path.startsWith('/plain')).length >= 40, 30_000, 50);
    // After the plain groups in INBOUND: the router, once it runs, reads them first.
    const waiting = await send(scripted.slug, -1);
    const forwarded = target.received.filter((r) => r.path.startsWith('/plain'));
    assert.equal(forwarded.length, 40, 'each request to each of the two URLs, once');
    assert.deepEqual(new Set(forwarded.map((r) => String(r.headers['x-jetcron-event-id']))), new Set(ids));
    const listed = await eventually(async () => {
      const res = await api('GET', `/endpoints/${plain.id}/events?limit=100`);
      return res.body.data.length === 20 ? res.body.data as Array<{ id: string; execution_status: string }> : undefined;
    });
    assert.deepEqual(new Set(listed.map((e) => e.id)), new Set(ids));

    // EVENTS: the receiver's commits on the organization's shared subjects, no subject per request.
    nats = await connectNats(svc.natsUrl, 'test reader');
    const evt = await nats.jsm.streams.info(STREAMS.events.name, { subjects_filter: `evt.${orgId}.>` });
    const subjects = Object.keys(evt.state.subjects ?? {});
    assert.ok(!subjects.some((s) => s.startsWith(`evt.${orgId}.inbound.`)), `no per-request subject: ${subjects.join(', ')}`);
    const commits = subjects.filter((s) => s.startsWith(`evt.${orgId}.inbound-received.`));
    const recorded: string[] = [];
    for (const subject of commits) {
      for (let seq = 0; ;) {
        const msg = await nats.jsm.direct.getMessage(STREAMS.events.name, { next_by_subj: subject, seq: seq + 1 }).catch(() => null);
        if (!msg) break;
        seq = msg.seq;
        const body = JSON.parse(new TextDecoder().decode(msg.data)) as { events?: Array<{ type: string; id: string }> } & { type?: string; id?: string };
        for (const e of body.events ?? [body as { type: string; id: string }]) {
          assert.equal(e.type, 'InboundEventReceived');
          recorded.push(e.id);
        }
      }
    }
    assert.deepEqual(recorded.sort(), ids.map((id) => `${id}.received`).sort(), 'one InboundEventReceived per request, none twice');
    // INBOUND: the plain endpoint's groups are marked as recorded; the scripted one's is the router's.
    const inboundSubjects = [SUBJECTS.inbound(orgId, plain.id), SUBJECTS.inbound(orgId, scripted.id)];
    const marked = new Map<string, number>();
    const last = (await nats.jsm.streams.info(STREAMS.inbound.name)).state.last_seq;
    for (let seq = 1; seq <= last; seq++) {
      const msg = await nats.jsm.streams.getMessage(STREAMS.inbound.name, { seq }).catch(() => null);
      if (!msg || !inboundSubjects.includes(msg.subject)) continue;
      const key = `${msg.subject === inboundSubjects[0] ? 'plain' : 'scripted'} ${msg.header?.get('Jetcron-Routed') ? 'recorded' : 'to route'}`;
      marked.set(key, (marked.get(key) ?? 0) + decodeStoredRequests(msg.data, msg.header).length);
    }
    assert.deepEqual(Object.fromEntries(marked), { 'plain recorded': 20, 'scripted to route': 1 });
    assert.ok(!target.received.some((r) => r.path === '/scripted'), 'no router, so the scripted endpoint\'s request is not forwarded yet');

    // The router, once it runs, routes the scripted endpoint's request and passes the recorded groups over.
    await svc.restart({ JETCRON_ROLES: 'api,projector,scheduler,dispatcher,notifier' });
    await eventually(async () => target.received.some((r) => r.path === '/scripted'), 30_000, 50);
    const scriptedRow = await eventually(async () => {
      const res = await api('GET', `/endpoints/${scripted.id}/events`);
      return res.body.data.length === 1 ? res.body.data[0] as { id: string } : undefined;
    });
    assert.equal(scriptedRow.id, waiting);
    const after = (await api('GET', `/endpoints/${plain.id}/events?limit=100`)).body.data as unknown[];
    assert.equal(after.length, 20, 'the recorded requests are not routed again');
    assert.equal(target.received.filter((r) => r.path.startsWith('/plain')).length, 40, 'nor forwarded again');
  } finally {
    await nats?.close();
    await target.close();
    await svc.stop();
  }
});
