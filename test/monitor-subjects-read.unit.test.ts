import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsMsg } from '@nats-io/jetstream';
import { monitorPartition } from '../src/commands/partition/partition-of.ts';
import { shareMonitorSubjectsRead, type LastOfEachMonitor } from '../src/owners/monitor-subjects-read.ts';

// The takeover read of every monitor subject's last message, shared by a process's monitor
// owners (src/owners/monitor-subjects-read.ts), over a read that hands on given messages.

const PARTITIONS = 4;
const ORG = 'org_share';
/** Monitor subjects, several in each partition. */
const messages = Array.from({ length: 40 }, (_, i) => ({ subject: `evt.${ORG}.monitor.mon_${i}`, seq: i + 1 }) as unknown as JsMsg);
const partitionOf = (m: JsMsg) => monitorPartition(ORG, m.subject.slice(`evt.${ORG}.monitor.`.length), PARTITIONS);

/** A read that hands on `messages` once `release` is called, recording each read's start. */
function fakeRead() {
  const starts: number[] = [];
  const signals: AbortSignal[] = [];
  let release = () => {};
  let fail: Error | null = null;
  const read: LastOfEachMonitor = async (signal, take) => {
    starts.push(starts.length);
    signals.push(signal);
    await new Promise<void>((r) => (release = r));
    if (fail) throw fail;
    for (const m of messages) take(m);
    return 99;
  };
  return { read, starts, signals, release: () => release(), failWith: (e: Error) => (fail = e) };
}

const untilRead = async (starts: number[], n: number) => {
  while (starts.length < n) await new Promise((r) => setTimeout(r, 5));
};

describe('one read of the monitor subjects for the owners taking over together', () => {
  test('asks made together share one read; each owner gets its own partition\'s monitors only, and the read\'s end', async () => {
    const f = fakeRead();
    const shared = shareMonitorSubjectsRead(f.read, PARTITIONS);
    const got = new Map<number, JsMsg[]>();
    const asks = [0, 1, 2, 3].map((p) => shared.lastOfEach(p, new AbortController().signal, (m) => got.set(p, [...(got.get(p) ?? []), m])));
    await untilRead(f.starts, 1);
    f.release();
    assert.deepEqual(await Promise.all(asks), [99, 99, 99, 99]);
    assert.equal(f.starts.length, 1, 'one read for four partitions');
    for (const p of [0, 1, 2, 3]) assert.deepEqual(got.get(p) ?? [], messages.filter((m) => partitionOf(m) === p), `partition ${p}`);
  });

  test('an ask made while a read is under way gets a read of its own, started after it (so after its claim)', async () => {
    const f = fakeRead();
    const shared = shareMonitorSubjectsRead(f.read, PARTITIONS);
    const first = shared.lastOfEach(0, new AbortController().signal, () => {});
    await untilRead(f.starts, 1);
    let lateGot = 0;
    const late = shared.lastOfEach(1, new AbortController().signal, () => lateGot++);
    f.release();
    assert.equal(await first, 99);
    await untilRead(f.starts, 2);
    assert.equal(lateGot, 0, 'nothing of the read that began before it asked');
    f.release();
    assert.equal(await late, 99);
    assert.equal(lateGot, messages.filter((m) => partitionOf(m) === 1).length);
  });

  test('an owner that stops is answered at once, the read goes on for the others and stops with the last; a failed read fails its askers', async () => {
    const f = fakeRead();
    const shared = shareMonitorSubjectsRead(f.read, PARTITIONS);
    const [a, b] = [new AbortController(), new AbortController()];
    const askA = shared.lastOfEach(0, a.signal, () => {});
    const askB = shared.lastOfEach(1, b.signal, () => {});
    await untilRead(f.starts, 1);
    a.abort();
    assert.equal(await askA, 0);
    assert.equal(f.signals[0]!.aborted, false, 'still read for the other');
    b.abort();
    assert.equal(await askB, 0);
    assert.equal(f.signals[0]!.aborted, true, 'no one left');
    f.release();

    const g = fakeRead();
    const again = shareMonitorSubjectsRead(g.read, PARTITIONS);
    const ask = again.lastOfEach(2, new AbortController().signal, () => {});
    await untilRead(g.starts, 1);
    g.failWith(new Error('consumer gone'));
    g.release();
    await assert.rejects(ask, /consumer gone/);
  });
  test('an owner stopped before it asks (its stop came while its claim was stored) is answered at once, and no read starts for it', async () => {
    const f = fakeRead();
    const shared = shareMonitorSubjectsRead(f.read, PARTITIONS);
    const stopped = new AbortController();
    stopped.abort();
    let taken = 0;
    // Before the fix this ask was left out of the read and never answered: its owner's term, and the process's stop, hung.
    const answer = await Promise.race([shared.lastOfEach(2, stopped.signal, () => taken++), new Promise((r) => setTimeout(() => r('unanswered'), 500))]);
    assert.equal(answer, 0);
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(f.starts.length, 0, 'no read for an ask that was over before it began');
    assert.equal(taken, 0);
    // The next owner's ask is served as usual.
    const next = shared.lastOfEach(1, new AbortController().signal, () => {});
    await untilRead(f.starts, 1);
    f.release();
    assert.equal(await next, 99);
  });
});
