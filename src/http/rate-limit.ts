import { SUBJECTS } from '../../streams/subjects.ts';
import type { Nats } from '../nats/connection.ts';

const PRESENCE_EVERY_MS = 2000;
const PRESENCE_TTL_MS = 6000;

interface Bucket {
  tokens: number;
  updated: number;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
  retryAfterSeconds: number;
}

/**
 * The per-organization API rate limit (token bucket, burst 2× the rate) held
 * across API processes without a round trip per request: each process takes an
 * equal share of the rate, the process count learnt from presence messages.
 */
export function createRateLimiter(nats: Nats, instanceId: string) {
  const peers = new Map<string, number>([[instanceId, Date.now()]]);
  const buckets = new Map<string, Bucket>();
  const announce = () => nats.nc.publish(SUBJECTS.apiPresence, instanceId);
  const sub = nats.nc.subscribe(SUBJECTS.apiPresence, {
    callback: (_e, m) => {
      const id = m.string();
      // A newcomer learns of us at once instead of at our next announcement.
      if (!peers.has(id)) announce();
      peers.set(id, Date.now());
    },
  });
  announce();
  const timer = setInterval(announce, PRESENCE_EVERY_MS);
  timer.unref();

  const processCount = () => {
    const now = Date.now();
    let n = 0;
    for (const [id, seen] of peers) {
      if (id === instanceId || now - seen < PRESENCE_TTL_MS) n++;
      else peers.delete(id);
    }
    return Math.max(1, n);
  };

  return {
    processCount,
    take(orgId: string, ratePerSecond: number): RateDecision {
      if (ratePerSecond <= 0) return { allowed: true, limit: 0, remaining: 0, resetSeconds: 0, retryAfterSeconds: 0 };
      const n = processCount();
      const rate = ratePerSecond / n;
      const capacity = (2 * ratePerSecond) / n;
      const now = performance.now();
      let b = buckets.get(orgId);
      if (!b) buckets.set(orgId, (b = { tokens: capacity, updated: now }));
      b.tokens = Math.min(capacity, b.tokens + ((now - b.updated) / 1000) * rate);
      b.updated = now;
      const allowed = b.tokens >= 1;
      if (allowed) b.tokens -= 1;
      return {
        allowed,
        limit: 2 * ratePerSecond,
        remaining: Math.max(0, Math.floor(b.tokens * n)),
        resetSeconds: Math.ceil((capacity - b.tokens) / rate),
        retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / rate)),
      };
    },
    close() {
      clearInterval(timer);
      sub.unsubscribe();
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
