import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideMonitor, type MonitorCommand } from '../../src/commands/monitor/decide.ts';
import { committed, HeldMonitors } from '../../src/commands/monitor/held-monitors.ts';
import type { Monitor, MonitorEvent } from '../../src/commands/monitor/types.ts';
import { later, meta, NOW } from './spec.ts';

// A monitor partition owner's memory (src/commands/monitor/held-monitors.ts): the latest
// event of each monitor wins by its position in the log wherever it was read (its own
// subject or a partition commit, in any order), a decision bound for a commit is held at
// once, and a request already stored is answered from the log.

const ORG = 'org_held';
const at = (id: string, now = NOW) => ({ ...meta(now), eventId: id });
const create = decideMonitor({ type: 'CreateMonitor', orgId: ORG, input: { name: 'm', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 60 } }, null, at('evt_create'))[0]!;
const fresh = create.data.monitor as Monitor;
const ID = fresh.id;
const ping = (id: string, receivedAt: string, suffix: string | null = null): MonitorCommand => ({
  type: 'Ping',
  ping: { id: `png_${id}`, received_at: receivedAt, suffix, rid: null, method: 'GET', source_ip: null, user_agent: null, body: '' },
});
const pinged = (state: Monitor, id: string, now: string) => decideMonitor(ping(id, now), state, at(id, now))[0]!;
const statusOf = (h: HeldMonitors) => h.stateOf(ORG, ID)?.status;

describe('held monitors: what a monitor partition owner holds', () => {
  test('which commands go in the partition\'s commits: pings and goings down; changes of the monitor on its own subject', () => {
    assert.equal(committed(ping('a', NOW)), true);
    assert.equal(committed({ type: 'CheckDeadline', deadlineAt: NOW }), true);
    for (const type of ['PauseMonitor', 'ResumeMonitor', 'DeleteMonitor'] as const) assert.equal(committed({ type }), false, type);
    assert.equal(committed({ type: 'UpdateMonitor', input: { name: 'n' } }), false);
  });

  test('the latest event by position wins, whichever way it was read first (the last of each subject, then the commits, or the other way)', () => {
    const up = pinged(fresh, 'evt_p1', later(1000));
    const pause = decideMonitor({ type: 'PauseMonitor' }, up.data.monitor as Monitor, at('evt_pause', later(2000)))[0]!;
    const orders: Array<Array<[number, number, MonitorEvent, boolean]>> = [
      [[1, 0, create, true], [5, 2, up, false], [9, 0, pause, true]],
      [[9, 0, pause, true], [5, 2, up, false], [1, 0, create, true]],
      [[5, 2, up, false], [9, 0, pause, true], [1, 0, create, true]],
    ];
    for (const order of orders) {
      const h = new HeldMonitors();
      for (const [seq, index, e, own] of order) h.read(ID, seq, index, e, own);
      assert.equal(statusOf(h), 'paused');
      assert.equal(h.get(ID)!.ownSeq, 9, 'the own subject\'s guard is its last sequence');
      assert.equal(h.lowestCommit(), null, 'no monitor\'s latest event is in a commit');
    }
  });

  test('within one commit the later index wins; a commit holding the latest event is where a takeover reads from', () => {
    const p1 = pinged(fresh, 'evt_p1', later(1000));
    const p2 = pinged(p1.data.monitor as Monitor, 'evt_p2', later(2000));
    const h = new HeldMonitors();
    h.read(ID, 1, 0, create, true);
    h.read(ID, 7, 3, p2, false);
    h.read(ID, 7, 1, p1, false);
    assert.equal(h.stateOf(ORG, ID)?.last_ping_at, later(2000));
    assert.equal(h.lowestCommit(), 7);
    // Another organization's request does not see it.
    assert.equal(h.stateOf('org_other', ID), null);
  });

  test('a decision held before its commit is stored: the next decision sees it, the log read meanwhile does not undo it; stored, it is answered from the log', () => {
    const h = new HeldMonitors();
    h.read(ID, 1, 0, create, true);
    const [start] = h.decide(ORG, ID, ping('s', later(1000), 'start'), at('evt_start', later(1000)));
    h.hold(ID, start!);
    assert.equal(h.stateOf(ORG, ID)?.runs.length, 1, 'held at once');
    assert.equal(h.lowestCommit(), null, 'not counted before its position is known');
    // An older event of its own subject read meanwhile leaves the held decision.
    h.read(ID, 1, 0, create, true);
    assert.equal(h.stateOf(ORG, ID)?.runs.length, 1);
    const [end] = h.decide(ORG, ID, ping('e', later(5000)), at('evt_end', later(5000)));
    assert.equal(end!.type, 'MonitorPinged');
    assert.equal((end as Extract<MonitorEvent, { type: 'MonitorPinged' }>).data.ping.duration_ms, 4000, 'the end closed the run held before it');
    h.stored(ID, start!, 12, 0);
    h.hold(ID, end!);
    h.stored(ID, end!, 12, 1);
    assert.equal(h.lowestCommit(), 12);
    assert.deepEqual(h.answered('evt_end'), { seq: 12, event: end });
    assert.equal(h.answered('evt_never'), undefined);
  });

  test('a takeover answers a request its predecessor stored (read back from the commit) with that event', () => {
    const p1 = pinged(fresh, 'evt_req', later(1000));
    const h = new HeldMonitors();
    h.read(ID, 1, 0, create, true);
    h.read(ID, 4, 0, p1, false);
    assert.deepEqual(h.answered('evt_req'), { seq: 4, event: p1 });
  });

  test('a deleted monitor is held as gone: its pings are not found', () => {
    const del = decideMonitor({ type: 'DeleteMonitor' }, fresh, at('evt_del', later(1000)))[0]!;
    const h = new HeldMonitors();
    h.read(ID, 1, 0, create, true);
    h.read(ID, 2, 0, del, true);
    assert.equal(h.stateOf(ORG, ID), null);
    assert.throws(() => h.decide(ORG, ID, ping('x', later(2000)), at('evt_x', later(2000))), /not found/i);
  });
});
