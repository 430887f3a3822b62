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
/** A second monitor of the organization (the spec's ids are made in order: the first create's again). */
const another = (id: string): MonitorEvent => ({ ...create, id: `evt_create_${id}`, data: { monitor: { ...fresh, id, name: id } } }) as MonitorEvent;

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

  test('the anchor: a monitor silent for more than the bound of commit events is restated (no ping, its state unchanged), once per bound, so the lowest commit a takeover reads from stays near the end', () => {
    const other = another('mon_busy');
    const BUSY = 'mon_busy';
    const h = new HeldMonitors(10);
    h.read(ID, 1, 0, create, true);
    h.read(BUSY, 2, 0, other, true);
    const silent = pinged(fresh, 'evt_once', later(1000));
    h.read(ID, 5, 0, silent, false);
    let seq = 5;
    /** One ping of the busy monitor, held and stored in a commit of its own; returns the restatements due with it. */
    const pingBusy = () => {
      const [e] = h.decide(ORG, BUSY, ping(`b${seq}`, later(2000 + seq)), at(`evt_b${seq}`, later(2000 + seq)));
      h.hold(BUSY, e!);
      const due = h.restates(() => later(2000 + seq));
      seq++;
      h.stored(BUSY, e!, seq, 0);
      return due;
    };
    for (let i = 0; i < 9; i++) assert.deepEqual(pingBusy(), [], `${i + 2} commit events: within the bound`);
    assert.equal(h.lowestCommit(), 5, 'the silent monitor holds the takeover back');
    const [restated, ...more] = pingBusy();
    assert.equal(more.length, 0);
    assert.equal(restated!.type, 'MonitorRestated');
    assert.equal(restated!.id, `${ID}.restated.5.0`, 'named after the event it repeats: a restatement decided twice is one');
    assert.deepEqual(restated!.data.monitor, h.stateOf(ORG, ID), 'the monitor unchanged');
    assert.equal((restated as Extract<MonitorEvent, { type: 'MonitorRestated' }>).data.restated_seq, 5);
    assert.equal('ping' in restated!.data, false, 'not a ping');
    // Committed like a ping: held now, placed once stored.
    h.hold(ID, restated!);
    h.stored(ID, restated!, ++seq, 1);
    assert.deepEqual(h.stateOf(ORG, ID), silent.data.monitor, 'held as it was');
    assert.equal(h.lowestCommit(), seq - 1, 'the busy monitor\'s commit is the lowest now');
    const restatedAt = seq;
    for (let i = 0; i < 9; i++) assert.deepEqual(pingBusy(), [], 'not again before another bound');
    assert.equal(pingBusy()[0]?.id, `${ID}.restated.${restatedAt}.1`, 'and again after it');
  });

  test('the anchor passes over a monitor whose latest event left the commits (a pause on its own subject), one deleted, and one with a decision on its way', () => {
    const h = new HeldMonitors(3);
    h.read(ID, 1, 0, create, true);
    const p1 = pinged(fresh, 'evt_a1', later(1000));
    h.read(ID, 5, 0, p1, false);
    const pause = decideMonitor({ type: 'PauseMonitor' }, p1.data.monitor as Monitor, at('evt_pause', later(2000)))[0]!;
    h.read(ID, 6, 0, pause, true);
    // Other commit events go by (read back: a takeover's count too).
    const other = another('mon_o');
    const O = 'mon_o';
    const op = pinged(other.data.monitor as Monitor, 'evt_o', later(3000));
    for (let s = 7; s < 20; s++) h.read(O, s, 0, op, false);
    assert.deepEqual(h.restates(() => later(4000)).map((e) => e.data.monitor.id), [], 'paused on its own subject: found there; the other\'s latest is recent');
    // A pinged monitor whose next ping is on its way is not restated: that ping is its newer event.
    const h2 = new HeldMonitors(3);
    h2.read(ID, 1, 0, create, true);
    h2.read(ID, 5, 0, p1, false);
    for (let s = 7; s < 20; s++) h2.read(O, s, 0, op, false);
    const [next] = h2.decide(ORG, ID, ping('n', later(5000)), at('evt_n', later(5000)));
    h2.hold(ID, next!);
    assert.deepEqual(h2.restates(() => later(5000)), []);
  });

  test('the anchor waits for a monitor whose change is being written on its own subject (a restatement could land after the change), and restates it at a later commit if it is still due', () => {
    const h = new HeldMonitors(3);
    h.read(ID, 1, 0, create, true);
    const p1 = pinged(fresh, 'evt_b1', later(1000));
    h.read(ID, 5, 0, p1, false);
    const op = pinged({ ...fresh, id: 'mon_o' }, 'evt_o', later(3000));
    for (let s = 7; s < 20; s++) h.read('mon_o', s, 0, op, false);
    assert.deepEqual(h.restates(() => later(4000), (id) => id === ID), [], 'busy: not now');
    // Asked again behind the entries due after it: once those are (a bound's more commit events).
    for (let s = 20; s < 30; s++) h.read('mon_o', s, 0, op, false);
    assert.deepEqual(h.restates(() => later(4000), () => false).map((e) => e.data.monitor.id), [ID], 'then, still due: restated');
    assert.deepEqual(h.restates(() => later(4000), () => false), [], 'once');
  });
});
