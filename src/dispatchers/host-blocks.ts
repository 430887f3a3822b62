import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import AsyncLock from 'async-lock';
import { watchForever } from '../nats/kv-watch.ts';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import type { Clock } from '../lib/clock.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { type HostState, type HostSignal, hostBlockKey, blockEnd, nextHostState } from '../commands/host-block/rules.ts';

export interface HostBlocks {
  /** When the host's block for the organization ends (epoch ms), 0 when not blocked. Local cache only. */
  blockedUntil(orgId: string, host: string): number;
  /** The cached state (for messages and tests). */
  state(orgId: string, host: string): HostState | null;
  /** Organization + host pairs blocked now, as the cache (the shared bucket) has them. */
  activeBlocks(): number;
  /**
   * Applies one attempt's signal to the shared entry (compare-and-set, re-read on a
   * conflict) and returns the state that holds afterwards. No write when nothing
   * changes, so a healthy host costs nothing.
   */
  record(orgId: string, host: string, signal: HostSignal): Promise<HostState | null>;
  close(): Promise<void>;
}

interface Cached {
  state: HostState | null;
  revision: number;
}

const CAS_TRIES = 8;
const READY_TIMEOUT_MS = 5_000;
const PRUNE_EVERY_MS = 10 * 60_000;

function entryState(e: KvEntry): HostState | null {
  if (e.operation !== 'PUT' || e.value.length === 0) return null;
  try {
    return decodeJson<HostState>(e.value);
  } catch {
    return null;
  }
}

/**
 * Opens the bucket, starts the watch and resolves once the cache holds what the
 * bucket held at start (or after 5 s, logged), so a restarted dispatcher does not
 * send to a host that is blocked.
 */
export async function openHostBlocks(deps: { nats: Nats; clock: Clock; log: (m: string) => void }): Promise<HostBlocks> {
  const kv: KV = await new Kvm(deps.nats.nc).open(KV_BUCKETS.hostBlocks.name);
  const cache = new Map<string, Cached>();

  const apply = (key: string, revision: number, state: HostState | null) => {
    const cur = cache.get(key);
    if (cur && cur.revision >= revision) return;
    if (state) cache.set(key, { state, revision });
    else cache.delete(key);
  };

  let markReady: () => void = () => {};
  const ready = new Promise<void>((r) => (markReady = r));
  const watch = await watchForever(kv, (e) => {
    apply(e.key, e.revision, entryState(e));
    if (e.isUpdate) markReady();
  }, deps.log, 'host-blocks');
  // The watch flags the last of the initial values; an empty bucket has none.
  await kv.status().then((st) => {
    if (st.values === 0) markReady();
  }, () => {});
  let readyTimer: NodeJS.Timeout | undefined;
  await Promise.race([
    ready,
    new Promise<void>((r) => {
      readyTimer = setTimeout(() => {
        deps.log('host-blocks: initial load not confirmed within 5 s; going on with what the watch delivered');
        r();
      }, READY_TIMEOUT_MS);
    }),
  ]);
  clearTimeout(readyTimer);

  // Entries that expire by the bucket's TTL produce no watch notification.
  const ttl = KV_BUCKETS.hostBlocks.ttlMs;
  const prune = setInterval(() => {
    const now = deps.clock.now();
    for (const [key, c] of cache) if (c.state && c.state.updated_at < now - ttl && c.state.blocked_until < now) cache.delete(key);
  }, PRUNE_EVERY_MS);
  prune.unref();

  // One write at a time per key within this process: concurrent failures to one
  // host would otherwise mostly conflict with each other.
  const writes = new AsyncLock({ maxPending: Infinity });

  async function write(key: string, host: string, signal: HostSignal): Promise<HostState | null> {
    for (let i = 1; ; i++) {
      const cur = cache.get(key) ?? { state: null, revision: 0 };
      const next = nextHostState(cur.state, signal, deps.clock.now(), deps.clock.wait, host);
      if (next === cur.state) return next;
      try {
        if (next === null) {
          await kv.delete(key, { previousSeq: cur.revision });
          cache.delete(key);
        } else {
          const data = encodeJson(next);
          const revision = cur.state ? await kv.update(key, data, cur.revision) : await kv.create(key, data);
          apply(key, revision, next);
        }
        return next;
      } catch (err) {
        // Another dispatcher changed the entry (or the cache was behind): re-read and decide again.
        if (i >= CAS_TRIES) throw err;
        await refresh(key);
      }
    }
  }

  /**
   * After a lost compare-and-set the server's entry is the truth, even when the cache
   * holds a higher revision (a write whose answer was lost, then undone by a leader
   * change): taking only newer revisions here would retry a stale one forever.
   */
  async function refresh(key: string): Promise<void> {
    const e = await kv.get(key);
    const state = e ? entryState(e) : null;
    if (e && state) cache.set(key, { state, revision: e.revision });
    else if (e) cache.set(key, { state: null, revision: e.revision });
    else cache.delete(key);
  }

  return {
    blockedUntil(orgId, host) {
      // No host has a state (the usual case): nothing to look up or encode.
      if (cache.size === 0) return 0;
      return blockEnd(cache.get(hostBlockKey(orgId, host))?.state, deps.clock.now());
    },
    state(orgId, host) {
      return cache.get(hostBlockKey(orgId, host))?.state ?? null;
    },
    activeBlocks() {
      const now = deps.clock.now();
      let n = 0;
      for (const c of cache.values()) if (blockEnd(c.state, now)) n++;
      return n;
    },
    record(orgId, host, signal) {
      if (signal.kind === 'up' && cache.size === 0) return Promise.resolve(null);
      const key = hostBlockKey(orgId, host);
      // The healthy path (no entry, host up) decides without queueing.
      if (signal.kind === 'up' && !cache.has(key)) return Promise.resolve(null);
      return writes.acquire(key, () => write(key, host, signal));
    },
    async close() {
      clearInterval(prune);
      watch.stop();
    },
  };
}
