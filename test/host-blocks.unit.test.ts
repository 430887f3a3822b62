import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { blockEnd, hostBlockKey, hostOf, hostSignalOf, nextHostState, type HostSignal, type HostState } from '../src/commands/host-block/rules.ts';
import type { OutboundResult } from '../src/commands/execution/exchange.ts';
import type { AttemptOutcome } from '../src/commands/execution/outcome.ts';

const HOST = 'api.example.com:443';
const T0 = Date.parse('2024-03-01T12:00:00Z');
const real = (ms: number) => ms;
const tenth = (ms: number) => Math.round(ms / 10);

function run(signals: Array<[HostSignal, number]>, wait = real, start: HostState | null = null): HostState | null {
  let s = start;
  for (const [signal, now] of signals) s = nextHostState(s, signal, now, wait, HOST);
  return s;
}
const fail = (startedAt: number): HostSignal => ({ kind: 'failure', startedAt });
const up = (startedAt: number): HostSignal => ({ kind: 'up', startedAt });

describe('hostOf and hostBlockKey', () => {
  test('host:port, lower-case, default ports filled in', () => {
    assert.equal(hostOf('https://API.Example.com/x?y=1'), 'api.example.com:443');
    assert.equal(hostOf('http://api.example.com/'), 'api.example.com:80');
    assert.equal(hostOf('http://api.example.com:80/'), 'api.example.com:80');
    assert.equal(hostOf('http://127.0.0.1:3001/a'), '127.0.0.1:3001');
    assert.equal(hostOf('http://[::1]:8080/'), '[::1]:8080');
    assert.notEqual(hostOf('http://127.0.0.1:3001'), hostOf('http://127.0.0.1:3002'));
  });
  test('no host for what is not an http(s) URL', () => {
    assert.equal(hostOf('not a url'), null);
    assert.equal(hostOf('ftp://example.com/'), null);
  });
  test('the key is the org and the host in hex, valid as a KV key', () => {
    const key = hostBlockKey('org_abc123', '127.0.0.1:3001');
    assert.equal(key, `org_abc123.${Buffer.from('127.0.0.1:3001').toString('hex')}`);
    assert.match(key, /^[-/_=.a-zA-Z0-9]+$/);
    assert.notEqual(hostBlockKey('org_a', HOST), hostBlockKey('org_b', HOST));
  });
});

describe('hostSignalOf', () => {
  const response = (statusCode: number, headers: Record<string, string> = {}): OutboundResult =>
    ({ kind: 'response', statusCode, headers, body: '', bytes: Buffer.alloc(0), truncated: false, startedAt: new Date(T0), durationMs: 5 });
  const error = (e: 'timeout' | 'connection' | 'refused_target' | 'invalid_url'): OutboundResult =>
    ({ kind: 'error', error: e, message: e, startedAt: new Date(T0), durationMs: 5 });
  const outcome = (status: AttemptOutcome['status'], retry_after_ms: number | null = null): AttemptOutcome =>
    ({ status, status_code: null, error_message: null, retryable: false, retry_after_ms });

  test('5xx, connection errors and timeouts are failures', () => {
    assert.deepEqual(hostSignalOf(response(503), outcome('failed')), { kind: 'failure', startedAt: T0 });
    assert.deepEqual(hostSignalOf(error('connection'), outcome('failed')), { kind: 'failure', startedAt: T0 });
    assert.deepEqual(hostSignalOf(error('timeout'), outcome('timeout')), { kind: 'failure', startedAt: T0 });
  });
  test('429 rate-limits for its Retry-After, else 60 s', () => {
    assert.deepEqual(hostSignalOf(response(429), outcome('failed', 90_000)), { kind: 'rate_limited', blockMs: 90_000 });
    assert.deepEqual(hostSignalOf(response(429), outcome('failed', null)), { kind: 'rate_limited', blockMs: 60_000 });
  });
  test('any other answer means the host is up; a 429 or 5xx the task expects too', () => {
    for (const code of [200, 204, 301, 404, 410]) assert.equal(hostSignalOf(response(code), outcome(code < 300 ? 'success' : 'failed'))?.kind, 'up', String(code));
    assert.equal(hostSignalOf(response(503), outcome('success'))?.kind, 'up');
    assert.equal(hostSignalOf(response(429), outcome('success'))?.kind, 'up');
  });
  test('a refused target or an invalid URL says nothing about the host', () => {
    assert.equal(hostSignalOf(error('refused_target'), outcome('failed')), null);
    assert.equal(hostSignalOf(error('invalid_url'), outcome('failed')), null);
  });
});

describe('nextHostState', () => {
  test('failures 1 and 2 only count; the 3rd blocks 30 s', () => {
    const two = run([[fail(T0), T0], [fail(T0 + 10), T0 + 20]]);
    assert.equal(two!.failures, 2);
    assert.equal(blockEnd(two, T0 + 20), 0);
    const three = nextHostState(two, fail(T0 + 30), T0 + 40, real, HOST)!;
    assert.equal(three.failures, 3);
    assert.equal(three.step, 1);
    assert.equal(three.blocked_until, T0 + 40 + 30_000);
    assert.equal(three.reason, 'failing');
    assert.equal(blockEnd(three, T0 + 40), T0 + 30_040);
    assert.equal(blockEnd(three, T0 + 30_040), 0, 'over at its end');
  });

  test('failures after each block escalate 60 s, 120 s, then 300 s at most', () => {
    let s = run([[fail(T0), T0], [fail(T0), T0], [fail(T0), T0]]);
    const blocks: number[] = [s!.blocked_until - T0];
    let now = T0;
    for (let i = 0; i < 4; i++) {
      now = s!.blocked_until + 1;
      s = nextHostState(s, fail(now), now + 5, real, HOST);
      blocks.push(s!.blocked_until - (now + 5));
    }
    assert.deepEqual(blocks, [30_000, 60_000, 120_000, 300_000, 300_000]);
  });

  test('failures of requests in flight when the block was set only count', () => {
    const blocked = run([[fail(T0), T0], [fail(T0), T0], [fail(T0), T0 + 100]])!;
    const more = run([[fail(T0 + 50), T0 + 200], [fail(T0 + 60), T0 + 300]], real, blocked)!;
    assert.equal(more.failures, 5);
    assert.equal(more.step, 1);
    assert.equal(more.blocked_until, blocked.blocked_until);
  });

  test('block durations are scaled by the clock', () => {
    const s = run([[fail(T0), T0], [fail(T0), T0], [fail(T0), T0]], tenth)!;
    assert.equal(s.blocked_until, T0 + 3_000);
    const r = nextHostState(null, { kind: 'rate_limited', blockMs: 60_000 }, T0, tenth, HOST)!;
    assert.equal(r.blocked_until, T0 + 6_000);
  });

  test('a success resets the streak and clears a failure block, even mid-block', () => {
    const blocked = run([[fail(T0), T0], [fail(T0), T0], [fail(T0), T0]])!;
    assert.equal(nextHostState(blocked, up(T0 - 5), T0 + 10, real, HOST), null);
    const two = run([[fail(T0), T0], [fail(T0), T0]])!;
    assert.equal(nextHostState(two, up(T0), T0 + 1, real, HOST), null);
    assert.equal(nextHostState(null, up(T0), T0, real, HOST), null, 'healthy stays absent');
  });

  test('after a reset it takes three failures again to block', () => {
    const s = run([[fail(T0), T0], [fail(T0), T0], [up(T0), T0], [fail(T0), T0 + 1], [fail(T0), T0 + 2]]);
    assert.equal(s!.failures, 2);
    assert.equal(blockEnd(s, T0 + 2), 0);
  });

  test('a 429 blocks at once for its Retry-After; a longer block stands; failures untouched', () => {
    const one = run([[fail(T0), T0]])!;
    const r = nextHostState(one, { kind: 'rate_limited', blockMs: 90_000 }, T0 + 10, real, HOST)!;
    assert.equal(r.blocked_until, T0 + 90_010);
    assert.equal(r.reason, 'rate_limited');
    assert.equal(r.failures, 1);
    assert.equal(nextHostState(r, { kind: 'rate_limited', blockMs: 1_000 }, T0 + 20, real, HOST), r, 'shorter: unchanged');
    const longer = nextHostState(r, { kind: 'rate_limited', blockMs: 200_000 }, T0 + 20, real, HOST)!;
    assert.equal(longer.blocked_until, T0 + 200_020);
  });

  test('a 429 block stands against a success sent before it; one sent after lifts it', () => {
    const r = run([[fail(T0), T0], [{ kind: 'rate_limited', blockMs: 60_000 }, T0 + 100]])!;
    const early = nextHostState(r, up(T0 + 50), T0 + 200, real, HOST)!;
    assert.equal(early.blocked_until, r.blocked_until);
    assert.equal(early.failures, 0);
    assert.equal(nextHostState(early, up(T0 + 60), T0 + 300, real, HOST), early, 'nothing left to change');
    assert.equal(nextHostState(r, up(T0 + 150), T0 + 200, real, HOST), null);
  });

  test('a huge Retry-After is cut to 24 h', () => {
    const r = nextHostState(null, { kind: 'rate_limited', blockMs: 10 * 24 * 3_600_000 }, T0, real, HOST)!;
    assert.equal(r.blocked_until, T0 + 24 * 3_600_000);
  });
});
