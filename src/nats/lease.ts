import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';

/**
 * A single-owner lease on a KV key. The bucket's max age expires a key that is not
 * renewed, so a crashed owner's lease lapses; `create` only succeeds when the key
 * is absent or deleted, and `update` with the last revision only while we own it.
 */
export interface Lease {
  readonly name: string;
  /** Resolves once we own it; rejects if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<void>;
  /** Called when a renewal finds someone else (or no one) owning the key. */
  onLost(fn: () => void): void;
  release(): Promise<void>;
}

export async function openLeaseBucket(nats: Nats): Promise<KV> {
  return new Kvm(nats.nc).open(KV_BUCKETS.leases.name);
}

export function createLease(kv: KV, name: string, owner: string): Lease {
  const renewEvery = Math.floor(KV_BUCKETS.leases.ttlMs / 3);
  let revision = 0;
  let timer: NodeJS.Timeout | undefined;
  const lost: Array<() => void> = [];

  const renew = async () => {
    try {
      revision = await kv.update(name, owner, revision);
    } catch {
      clearInterval(timer);
      timer = undefined;
      revision = 0;
      for (const fn of lost) fn();
    }
  };

  return {
    name,
    onLost: (fn) => void lost.push(fn),
    async acquire(signal) {
      while (!signal.aborted) {
        try {
          revision = await kv.create(name, owner);
          timer = setInterval(() => void renew(), renewEvery);
          return;
        } catch {
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      throw new Error(`lease ${name}: aborted`);
    },
    async release() {
      clearInterval(timer);
      timer = undefined;
      if (revision) {
        await kv.delete(name, { previousSeq: revision }).catch(() => {});
        revision = 0;
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
