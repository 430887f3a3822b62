import type { Nats } from './connection.ts';

const PROBE_TIMEOUT_MS = 2000;
/** A scrape and a health check close together share one answer: these calls cost the stream's leader a round trip each. */
const MAX_AGE_MS = 1500;

export function within<T>(p: Promise<T>, ms = PROBE_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new Error('timeout')), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Where streams end and how much work waits on a work queue, from JetStream info
 * calls, each answer kept for 1.5 s. Used by `/healthz` and `/metrics`.
 */
export function createStreamInfo(nats: Nats) {
  const cache = new Map<string, { at: number; value: Promise<number> }>();
  const cached = (key: string, load: () => Promise<number>): Promise<number> => {
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < MAX_AGE_MS) return hit.value;
    const value = within(load());
    cache.set(key, { at: Date.now(), value });
    // A failed call is not kept: the next caller asks again.
    value.catch(() => cache.get(key)?.value === value && cache.delete(key));
    return value;
  };
  return {
    /** The stream's last sequence. */
    lastSeq: (stream: string) => cached(`stream ${stream}`, async () => (await nats.jsm.streams.info(stream)).state.last_seq),
    /** A durable consumer's messages not yet delivered plus those delivered and not yet acknowledged. */
    backlog: (stream: string, durable: string) =>
      cached(`consumer ${stream} ${durable}`, async () => {
        const info = await nats.jsm.consumers.info(stream, durable);
        return info.num_pending + info.num_ack_pending;
      }),
  };
}

export type StreamInfo = ReturnType<typeof createStreamInfo>;
