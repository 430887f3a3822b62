import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';
import { isWrongLastSequence } from './jetstream-errors.ts';
import { quickClient } from './quick-clients.ts';

/**
 * A single-owner lease on a KV key. The bucket's max age expires a key that is not
 * renewed, so a crashed owner's lease lapses; `create` only succeeds when the key
 * is absent or deleted, and `update` with the last revision only while we own it.
 */
export interface Lease {
  readonly name: string;
  /** Resolves once we own it; rejects if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<void>;
  /**
   * Whether the holding is still good now, by the monotonic clock rather than a timer:
   * a process frozen past its lease (SIGSTOP, a long pause) and then resumed may run
   * other callbacks before its expiry timer, so whoever acts for the lease asks first.
   */
  held(): boolean;
  /** Called when a renewal finds someone else (or no one) owning the key. */
  onLost(fn: () => void): void;
  release(): Promise<void>;
}

export async function openLeaseBucket(nats: Nats): Promise<KV> {
  // Short request timeouts: a renewal must fail (and be retried) well within the TTL.
  return new Kvm(quickClient(nats)).open(KV_BUCKETS.leases.name);
}

// A holder that could not renew stops this long before its key would expire, so two
// holders never work at once even if its clock runs a little behind the server's.
const STOP_BEFORE_EXPIRY_MS = 2_000;
const RETRY_RENEW_MS = 1_000;

export function createLease(kv: KV, name: string, owner: string, log: (m: string) => void = () => {}): Lease {
  const ttl = KV_BUCKETS.leases.ttlMs;
  const renewEvery = Math.floor(ttl / 3);
  // Each holding is a generation; an answer that arrives after the holding ended is ignored.
  let generation = 0;
  let revision = 0;
  let renewedAt = 0;
  let renewedAtMono = 0;
  let timer: NodeJS.Timeout | undefined;
  let expiry: NodeJS.Timeout | undefined;
  let failing = false;
  const lost: Array<() => void> = [];

  const clearTimers = () => {
    clearTimeout(timer);
    clearTimeout(expiry);
    timer = expiry = undefined;
  };

  const drop = (why: string) => {
    if (!revision) return;
    clearTimers();
    revision = 0;
    generation++;
    log(`lease ${name}: lost (${why}); stopping its work`);
    for (const fn of lost) fn();
  };

  // Whatever a pending renewal is doing, the work stops before the key can expire.
  const renewed = (rev: number) => {
    revision = rev;
    renewedAt = Date.now();
    renewedAtMono = performance.now();
    clearTimeout(expiry);
    expiry = setTimeout(() => drop(`no renewal for ${((Date.now() - renewedAt) / 1000).toFixed(1)} s`), ttl - STOP_BEFORE_EXPIRY_MS);
  };

  /** Our own write whose answer was lost (a timeout, a leader change): the key still names us. */
  const stillOurs = async (): Promise<number> => {
    const e = await kv.get(name).catch(() => null);
    return e && e.operation === 'PUT' && e.string() === owner ? e.revision : 0;
  };

  const renew = async (): Promise<void> => {
    const mine = generation;
    if (!revision) return;
    try {
      const rev = await kv.update(name, owner, revision);
      if (mine !== generation) return; // released or dropped meanwhile
      renewed(rev);
      if (failing) log(`lease ${name}: renewed again`);
      failing = false;
      timer = setTimeout(() => void renew(), renewEvery);
    } catch (err) {
      if (mine !== generation) return;
      if (isWrongLastSequence(err)) {
        const rev = await stillOurs();
        if (mine !== generation) return;
        if (rev) {
          revision = rev;
          return renew();
        }
        return drop('another process holds it');
      }
      // Unknown (a timeout, an election): try again; the expiry timer ends the holding in time.
      if (!failing) log(`lease ${name}: renewal failed (${(err as Error).message}); retrying until ${Math.round((renewedAt + ttl - STOP_BEFORE_EXPIRY_MS - Date.now()) / 1000)} s from now`);
      failing = true;
      timer = setTimeout(() => void renew(), RETRY_RENEW_MS);
    }
  };

  return {
    name,
    onLost: (fn) => void lost.push(fn),
    held: () => revision !== 0 && performance.now() - renewedAtMono < ttl - STOP_BEFORE_EXPIRY_MS,
    async acquire(signal) {
      while (!signal.aborted) {
        let rev = 0;
        try {
          rev = await kv.create(name, owner);
        } catch {
          // Someone's key, or our own write whose answer was lost: the key says which.
          rev = await stillOurs();
        }
        if (rev) {
          generation++;
          failing = false;
          renewed(rev);
          timer = setTimeout(() => void renew(), renewEvery);
          return;
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      throw new Error(`lease ${name}: aborted`);
    },
    async release() {
      clearTimers();
      generation++;
      if (revision) {
        const rev = revision;
        revision = 0;
        await kv.delete(name, { previousSeq: rev }).catch(() => {});
      }
    },
  };
}

/**
 * Runs `work` whenever we hold the lease: acquire, work until it ends, the lease
 * is lost or `signal` aborts, release, and start over. A failing `work` is
 * logged and restarted after a pause; resolves once `signal` aborts.
 */
export async function whileLeased(
  lease: Lease,
  signal: AbortSignal,
  log: (m: string) => void,
  work: (signal: AbortSignal) => Promise<void>,
): Promise<void> {
  let current: AbortController | undefined;
  lease.onLost(() => current?.abort());
  while (!signal.aborted) {
    try {
      await lease.acquire(signal);
    } catch {
      return;
    }
    const run = (current = new AbortController());
    const stop = () => run.abort();
    signal.addEventListener('abort', stop, { once: true });
    // Aborted while the lease was being taken: the listener came too late to fire.
    if (signal.aborted) run.abort();
    try {
      await work(run.signal);
    } catch (err) {
      log(`${lease.name}: ${(err as Error).message}; restarting`);
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      signal.removeEventListener('abort', stop);
      await lease.release();
    }
  }
}
