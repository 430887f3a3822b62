import type { OutboundResult } from '../execution/exchange.ts';
import type { AttemptOutcome } from '../execution/outcome.ts';

/**
 * Per-host backoff, per organization. A host is `hostname:port` of the target URL
 * (lower-case, default port filled in), so two servers on one address with different
 * ports are different hosts. The state of each organization + host lives in the KV
 * bucket `host-blocks` (key `<org>.<hex of host>`), shared by every dispatcher;
 * each dispatcher reads it from a local cache fed by a KV watch, so checking a host
 * costs no round trip. Only a change (a failure, a 429, the first success after
 * failures) writes the bucket, with a compare-and-set on the entry's revision.
 */

/** Consecutive failures (5xx, connection error, timeout) that block the host. */
export const FAILURES_BEFORE_BLOCK = 3;
/** The 3rd failure blocks 30 s; each failure after a block ended escalates, up to 5 min. */
export const FAILURE_BLOCKS_MS = [30_000, 60_000, 120_000, 300_000] as const;
/** A 429 without a usable Retry-After. */
export const RATE_LIMIT_BLOCK_MS = 60_000;
/** A Retry-After longer than this is cut to it (it is also the bucket's entry TTL). */
export const MAX_RATE_LIMIT_BLOCK_MS = 24 * 3_600_000;

export interface HostState {
  host: string;
  /** Consecutive failures (5xx, connection errors, timeouts) in the current streak. */
  failures: number;
  /** Blocks set by failures in this streak: 1 → 30 s, 2 → 60 s, 3 → 120 s, 4+ → 300 s. */
  step: number;
  /** Epoch ms the current block ends (already scaled by JETCRON_TIME_SCALE); 0 = never blocked. */
  blocked_until: number;
  /** Epoch ms the current block was set or last extended. */
  blocked_at: number;
  reason: 'rate_limited' | 'failing' | null;
  updated_at: number;
}

/** What one attempt says about its host. */
export type HostSignal =
  /** The host answered with something other than a 5xx or a 429. */
  | { kind: 'up'; startedAt: number }
  /** A 5xx, a connection error or a timeout. */
  | { kind: 'failure'; startedAt: number }
  /** A 429; `blockMs` is the Retry-After (or 60 s) before scaling. */
  | { kind: 'rate_limited'; blockMs: number };

/** `hostname:port`, lower-case, default port filled in; null for a URL that does not parse. */
export function hostOf(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  return `${u.hostname.toLowerCase()}:${port}`;
}

/** The bucket key: KV keys allow few characters, so the host goes in hex. */
export function hostBlockKey(orgId: string, host: string): string {
  return `${orgId}.${Buffer.from(host, 'utf8').toString('hex')}`;
}

/**
 * The host's view of an attempt. Success as the task defines it, and any answer
 * that is neither a 5xx nor a 429 (a 404 too), mean the host is up. A refused
 * target or an invalid URL never reached a host and says nothing.
 */
export function hostSignalOf(result: OutboundResult, outcome: AttemptOutcome): HostSignal | null {
  const startedAt = result.startedAt.getTime();
  if (result.kind === 'error') {
    return result.error === 'timeout' || result.error === 'connection' ? { kind: 'failure', startedAt } : null;
  }
  if (outcome.status === 'success') return { kind: 'up', startedAt };
  if (result.statusCode === 429) return { kind: 'rate_limited', blockMs: outcome.retry_after_ms ?? RATE_LIMIT_BLOCK_MS };
  if (result.statusCode >= 500) return { kind: 'failure', startedAt };
  return { kind: 'up', startedAt };
}

/** The end of the host's block, or 0 when it is not blocked at `now`. */
export function blockEnd(state: HostState | null | undefined, now: number): number {
  return state && state.blocked_until > now ? state.blocked_until : 0;
}

/**
 * The next state of an organization + host after one attempt; the same object
 * when nothing changes, null when the entry should go (a healthy host has none).
 * `wait` is Clock.wait: block durations are scaled by JETCRON_TIME_SCALE.
 *
 * - A 429 blocks for its Retry-After (60 s without one) from now, unless a longer
 *   block already stands. It does not touch the failure count.
 * - A failure counts; the 3rd in a row blocks 30 s. A failure of a request that
 *   started before the current block ended (in flight when the block was set)
 *   only counts; one that started after it escalates: 60 s, 120 s, then 300 s.
 *   So a burst of concurrent failures raises the block one step, not one per request.
 * - Up resets the count and clears the block, except that a 429 block stands
 *   against a success of a request sent before the 429 arrived: the target asked
 *   for a pause and an earlier answer does not lift it.
 */
export function nextHostState(
  state: HostState | null,
  signal: HostSignal,
  now: number,
  wait: (ms: number) => number,
  host: string,
): HostState | null {
  const s: HostState = state ?? { host, failures: 0, step: 0, blocked_until: 0, blocked_at: 0, reason: null, updated_at: now };
  switch (signal.kind) {
    case 'rate_limited': {
      const until = now + wait(Math.min(Math.max(signal.blockMs, 0), MAX_RATE_LIMIT_BLOCK_MS));
      if (until <= s.blocked_until) return state;
      return { ...s, blocked_until: until, blocked_at: now, reason: 'rate_limited', updated_at: now };
    }
    case 'failure': {
      const failures = s.failures + 1;
      if (failures < FAILURES_BEFORE_BLOCK || signal.startedAt < s.blocked_until) return { ...s, failures, updated_at: now };
      const step = s.step + 1;
      const ms = FAILURE_BLOCKS_MS[Math.min(step, FAILURE_BLOCKS_MS.length) - 1]!;
      const until = Math.max(now + wait(ms), s.blocked_until);
      return { ...s, failures, step, blocked_until: until, blocked_at: now, reason: 'failing', updated_at: now };
    }
    case 'up': {
      if (!state) return null;
      const rateLimitStands = state.reason === 'rate_limited' && state.blocked_until > now && signal.startedAt < state.blocked_at;
      if (!rateLimitStands) return null;
      if (state.failures === 0 && state.step === 0) return state;
      return { ...state, failures: 0, step: 0, updated_at: now };
    }
    default: {
      const never: never = signal;
      return never;
    }
  }
}
