/**
 * A monitor owner's restatements (`MonitorRestated`, the anchor that bounds a takeover's
 * read) through every reader of the whole service: a monitor pinged once and gone down
 * stays silent while another monitor of its partition is pinged on, so its owner restates
 * it. The notifier sends its going down once, the read models show it as its events
 * left it, a rebuild gives the same answers, and an analyst's replay sees its one ping.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SUBJECTS } from '../streams/subjects.ts';
import { rebuildProjections } from '../src/cli/rebuild.ts';
import { monitorPartition } from '../src/commands/partition/partition-of.ts';
import type { MonitorEvent } from '../src/commands/monitor/types.ts';
import { connectDb } from '../src/db/connect.ts';
import { eventsOf } from '../src/commands/commit.ts';
import type { JetcronEvent } from '../src/commands/events.ts';
import { connectNats } from '../src/nats/connection.ts';
import { defineProjection, replayProjection } from '../src/replay/projection.ts';
import { readEvents } from './support/jetcron-process.ts';
import { eventually, startTestService, type Api, type TestService } from './support/service.ts';
import { startTarget } from './support/target.ts';

const PARTITIONS = 8;
const RESTATE_AFTER = 20;

describe('monitor restatements through every reader', () => {
  let svc: TestService;
  let api: Api;
  let orgId: string;
  before(async () => {
    // interval 60 s → 0.6 s; a monitor silent for 20 of its partition's commit events is restated.
    svc = await startTestService({ JETCRON_TIME_SCALE: '0.01', JETCRON_MONITOR_RESTATE_AFTER: String(RESTATE_AFTER), JETCRON_PARTITIONS: String(PARTITIONS) });
    ({ api, orgId } = await svc.createOrg('pro'));
  });
  after(() => svc.stop());

  test('a silent monitor restated: notified once, the same rows, the same after a rebuild, and a replay sees only its one ping', async () => {
    const hook = await startTarget();
    const nats = await connectNats(svc.natsUrl, 'restatements test');
    const { db } = connectDb(svc.databaseUrl);
    try {
      await api('PUT', '/organization', { notification_webhook_url: `${hook.url}/org` });
      const silent = (await api('POST', '/monitors', { name: 'silent', schedule_type: 'interval', interval_seconds: 60, grace_period_seconds: 0 })).body.data;
      const partition = monitorPartition(orgId, silent.id, PARTITIONS);
      let busy = (await api('POST', '/monitors', { name: 'busy', schedule_type: 'interval', interval_seconds: 604800, grace_period_seconds: 0 })).body.data;
      while (monitorPartition(orgId, busy.id, PARTITIONS) !== partition) {
        await api('DELETE', `/monitors/${busy.id}`);
        busy = (await api('POST', '/monitors', { name: 'busy', schedule_type: 'interval', interval_seconds: 604800, grace_period_seconds: 0 })).body.data;
      }
      assert.equal((await fetch(silent.ping_url)).status, 200);
      const orgNotes = () => hook.received.filter((r) => r.path === '/org').map((r) => JSON.parse(r.body));
      await eventually(async () => orgNotes().some((n) => n.event === 'monitor.down' && n.monitor.id === silent.id), 30_000);

      for (let i = 0; i < 4 * RESTATE_AFTER; i++) assert.equal((await fetch(busy.ping_url)).status, 200);
      const commits = await readEvents(nats, SUBJECTS.monitorPartition(partition));
      const ofSilent = commits.flatMap((m) => eventsOf<MonitorEvent>(m.event as never)).filter((e) => e.data?.monitor?.id === silent.id);
      const restated = ofSilent.filter((e) => e.type === 'MonitorRestated');
      assert.ok(restated.length >= 1, 'the silent monitor was restated');
      assert.ok(restated.every((e) => e.data.monitor.status === 'down'), 'as it was: down');

      // The busy one goes down too: once its notification is sent, the notifier has read every restatement before it.
      assert.equal((await fetch(`${busy.ping_url}/fail`)).status, 200);
      await eventually(async () => orgNotes().some((n) => n.event === 'monitor.down' && n.monitor.id === busy.id), 30_000);
      assert.deepEqual(orgNotes().filter((n) => n.monitor.id === silent.id).map((n) => n.event), ['monitor.down'], 'a restatement is no transition');

      const snapshot = async () => ({
        silent: (await api('GET', `/monitors/${silent.id}`)).body.data,
        silentPings: (await api('GET', `/monitors/${silent.id}/pings?limit=100`)).body.data,
        busyPings: (await api('GET', `/monitors/${busy.id}/pings?limit=100`)).body.data.length,
      });
      await eventually(async () => (await snapshot()).busyPings === 4 * RESTATE_AFTER + 1);
      const before = await snapshot();
      assert.equal(before.silent.status, 'down');
      assert.equal(before.silentPings.length, 1, 'one ping row: a restatement is none');

      await svc.stopService();
      await rebuildProjections({ natsUrl: svc.natsUrl, databaseUrl: svc.databaseUrl, dataDir: '/nonexistent', log: () => {}, print: () => {} });
      await svc.startService();
      const rebuilt = await snapshot();
      assert.deepEqual({ ...rebuilt, silent: { ...rebuilt.silent, ping_url: null } }, { ...before, silent: { ...before.silent, ping_url: null } });

      const seen: JetcronEvent[] = [];
      await replayProjection({ nats, db, databaseUrl: svc.databaseUrl, log: () => {} }, defineProjection({
        name: 'restatement_count',
        setup: async () => {},
        teardown: async () => {},
        apply: async (events) => {
          for (const { event } of events) if ((event.data as { monitor?: { id?: string } }).monitor?.id === silent.id) seen.push(event);
        },
      }), { fromStart: true });
      assert.deepEqual(seen.filter((e) => e.type !== 'MonitorRestated').map((e) => e.type), ['MonitorCreated', 'MonitorPinged', 'MonitorWentDown']);
      assert.ok(seen.some((e) => e.type === 'MonitorRestated'), 'told apart by its type');
    } finally {
      await hook.close();
      await nats.close();
      await db.destroy();
    }
  });
});
