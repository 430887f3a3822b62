import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { duration, startProgress, summaryLine } from '../src/cli/progress.ts';
import { table } from '../src/cli/status-text.ts';

/** A stand-in for process.stderr that keeps what was written. */
function fakeOut(isTTY: boolean, columns?: number) {
  const writes: string[] = [];
  return { out: { isTTY, columns, write: (t: string) => void writes.push(t) }, writes, text: () => writes.join('') };
}

function clock() {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

describe('progress on a terminal', () => {
  test('redraws one line in place with the bar, at most every 100 ms, then ends with the summary', () => {
    const { out, writes, text } = fakeOut(true);
    const c = clock();
    const p = startProgress({ label: 'rebuild', total: 1000, out, now: c.now });
    // Ten updates within 100 ms draw nothing: the bar is not redrawn more than 10 times a second.
    for (let i = 1; i <= 10; i++) {
      c.advance(9);
      p.update(i * 10);
    }
    assert.equal(writes.length, 0);
    c.advance(10); // 100 ms in
    p.update(250);
    assert.equal(writes.length, 1);
    assert.equal(writes[0], '\r\x1b[Krebuild [######------------------] 250/1000 events (25.0%), 2,500/s, ETA 0s');
    c.advance(50);
    p.update(300);
    assert.equal(writes.length, 1, 'a second redraw within 100 ms');
    c.advance(50);
    p.update(500);
    assert.equal(writes.length, 2);
    assert.match(writes[1]!, /^\r\x1b\[Krebuild \[#{12}-{12}\] 500\/1000 events \(50\.0%\), 2,500\/s, ETA 0s$/);
    assert.ok(!text().includes('\n'), 'redraws stay on one line');

    c.advance(200);
    assert.equal(p.finish(1000), 0.4);
    assert.equal(writes.at(-1), '\r\x1b[Krebuild: 1,000 events in 0.4 s (2,500/s)\n');
    p.update(1000);
    p.finish(1000);
    assert.equal(writes.length, 3, 'nothing after the end');
  });

  test('ETA from the rate so far; the line fits the terminal', () => {
    const { out, writes } = fakeOut(true, 40);
    const c = clock();
    const p = startProgress({ label: 'replay x', total: 450_000, out, now: c.now });
    c.advance(10_000);
    p.update(100_000);
    assert.equal(writes[0], '\r\x1b[K' + 'replay x [#####-------------------] 100000/450000 events (22.2%), 10,000/s, ETA 35s'.slice(0, 39));
  });

  test('a log line written aside clears the bar and draws it again below', () => {
    const { out, writes } = fakeOut(true);
    const c = clock();
    const p = startProgress({ label: 'rebuild', total: 10, out, now: c.now });
    p.aside(() => out.write('before the bar\n'));
    assert.deepEqual(writes, ['before the bar\n'], 'no bar yet: written as it is');
    c.advance(100);
    p.update(5);
    p.aside(() => out.write('a log line\n'));
    assert.equal(writes.length, 5);
    assert.equal(writes[2], '\r\x1b[K');
    assert.equal(writes[3], 'a log line\n');
    assert.match(writes[4]!, /^\r\x1b\[Krebuild \[.+\] 5\/10 events/);
  });
});

describe('progress into a file or pipe', () => {
  test('a plain line every 5 s, no control characters, then the summary', () => {
    const { out, writes } = fakeOut(false);
    const c = clock();
    const p = startProgress({ label: 'rebuild', total: 450_000, out, now: c.now });
    for (let s = 1; s <= 12; s++) {
      c.advance(1000);
      p.update(s * 21_000);
    }
    assert.deepEqual(writes, [
      'rebuild: 105000/450000 events (23.3%), 21,000/s, ETA 16s\n',
      'rebuild: 210000/450000 events (46.7%), 21,000/s, ETA 11s\n',
    ]);
    c.advance(500);
    p.finish(450_000);
    assert.equal(writes.at(-1), 'rebuild: 450,000 events in 12.5 s (36,000/s)\n');
    assert.ok(!writes.join('').includes('\r'));
  });

  test('a finish with a note (replay --follow caught up)', () => {
    const { out, writes } = fakeOut(false);
    const c = clock();
    const p = startProgress({ label: 'replay daily', total: 0, out, now: c.now });
    c.advance(2000);
    p.finish(0, 'caught up, following');
    assert.deepEqual(writes, ['replay daily: 0 events in 2.0 s (0/s); caught up, following\n']);
  });
});

test('durations and summary lines', () => {
  assert.equal(duration(16.4), '16s');
  assert.equal(duration(125), '2m05s');
  assert.equal(duration(3725), '1h02m');
  assert.equal(summaryLine('rebuild', 0, 0), 'rebuild: 0 events in 0.0 s (0/s)');
});

test('status tables align columns and right-align numbers', () => {
  assert.equal(table(['name', 'messages', 'oldest'], [['EVENTS', 1234, 'x'], ['TIMERS', 5, null]]), [
    'name    messages  oldest',
    'EVENTS     1,234  x',
    'TIMERS         5  -',
  ].join('\n'));
});
