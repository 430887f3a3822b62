import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { Nats } from './connection.ts';
import { quickClient as quick } from './quick-clients.ts';
import { readRange, type RangeItem } from './range-reader.ts';
import { tracingOn } from '../telemetry/tracing.ts';

/**
 * Pulls that notice a lost consumer in seconds. nats.js's defaults (30 s pulls, and
 * after missed heartbeats a consumer-info check that waits on the consumer's dead
 * leader) left readers stalled 30–90 s when a cluster node died. Here pulls expire
 * after 2 s, so a heartbeat is due every second; when two are missed the pull loop is
 * closed and started again: an ordered read creates a new consumer from the next
 * sequence it has not handed on, a durable one pulls again (from its new leader).
 */
const EXPIRES_MS = 2_000;

/** The writer's W3C trace context, when the message carries one (a header is parsed only if there are any). */
export const traceparentOf = (m: JsMsg): string | undefined => (m.headers ? m.headers.get('traceparent') || undefined : undefined);

const RETRY_MAX_MS = 1_000;
/** A reader busy this long with the last message handed to it is slow, not the consumer dead. */
const HANDED_OFF_GRACE_MS = 1_000;

interface FollowOptions {
  signal: AbortSignal;
  log: (m: string) => void;
  name: string;
  maxMessages: number;
}

async function* pullLoop(open: () => Promise<ConsumerMessages>, opts: FollowOptions, where: () => string): AsyncGenerator<JsMsg> {
  let failures = 0;
  /** Since when the reader holds a message it has not come back for (undefined: it is waiting on us). */
  let handedSince: number | undefined;
  while (!opts.signal.aborted) {
    let messages: ConsumerMessages;
    try {
      messages = await open();
    } catch (err) {
      if (opts.signal.aborted) return;
      failures++;
      if (failures === 1 || failures % 10 === 0) opts.log(`${opts.name}: cannot start reading (${(err as Error).message}); trying again`);
      await new Promise((r) => setTimeout(r, Math.min(250 * failures, RETRY_MAX_MS)));
      continue;
    }
    if (failures) opts.log(`${opts.name}: reading again ${where()}`);
    failures = 0;
    const close = () => void messages.close().catch(() => {});
    // Aborted while the consumer was being created: a listener added now would never fire.
    if (opts.signal.aborted) {
      close();
      return;
    }
    opts.signal.addEventListener('abort', close, { once: true });
    void (async () => {
      for await (const s of messages.status()) {
        // A reader that has stopped taking messages (its buffer is full) asks for no
        // more, so the server has no pull to send heartbeats on: that silence is ours.
        if (s.type === 'heartbeats_missed' && handedSince !== undefined && Date.now() - handedSince > HANDED_OFF_GRACE_MS) continue;
        if (s.type === 'heartbeats_missed') {
          opts.log(`${opts.name}: its consumer stopped answering (missed heartbeats); starting over ${where()}`);
          failures = 1;
          close();
          return;
        }
      }
    })().catch(() => {});
    try {
      for await (const m of messages) {
        handedSince = Date.now();
        yield m;
        handedSince = undefined;
      }
    } catch (err) {
      if (!opts.signal.aborted) opts.log(`${opts.name}: reading ended (${(err as Error).message}); starting over ${where()}`);
      failures = 1;
    } finally {
      opts.signal.removeEventListener('abort', close);
      close();
    }
  }
}

/**
 * An ordered read of `stream` (optionally one subject filter, or headers only) from
 * `startSeq`, in batches of what has arrived, until `signal` aborts, whatever happens to
 * the consumers underneath. Our own pulls (`readRange` with no end), not nats.js's
 * `consume()`: nats-server 2.9.10 now and then drops an expired pull without a word,
 * which `consume()` notices only after two missed heartbeats (2 s), the range reader
 * 100 ms after the pull's expiry (range-reader.ts).
 */
export function followBatches(nats: Nats, opts: FollowOptions & { stream: string; startSeq: number; filter?: string | undefined; headersOnly?: boolean | undefined; headers?: boolean }): AsyncGenerator<RangeItem[]> {
  const { maxMessages, ...rest } = opts;
  return readRange(nats, { ...rest, endSeq: Infinity, pullMessages: maxMessages, traceparents: tracingOn() });
}

/** `followBatches` one message at a time. */
export async function* followOrdered(nats: Nats, opts: Parameters<typeof followBatches>[1]): AsyncGenerator<RangeItem> {
  for await (const batch of followBatches(nats, opts)) yield* batch;
}

/** Pulls from a durable consumer until `signal` aborts, pulling again whenever its leader changes. */
export function followDurable(nats: Nats, opts: FollowOptions & { stream: string; durable: string }): AsyncGenerator<JsMsg> {
  const open = async () => {
    const consumer = await quick(nats).consumers.get(opts.stream, opts.durable);
    return consumer.consume({ max_messages: opts.maxMessages, expires: EXPIRES_MS });
  };
  return pullLoop(open, opts, () => `from ${opts.stream}/${opts.durable}`);
}
