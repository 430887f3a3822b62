import { STREAMS } from '../../streams/definitions.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { ApiError } from '../lib/errors.ts';
import type { Nats } from '../nats/connection.ts';
import { decodeEvents } from '../nats/event-reader.ts';
import { followEvents, type TapItem } from '../nats/events-tap.ts';
import { within } from '../nats/stream-info.ts';
import { liveMessage, sseFrame } from './messages.ts';

/** How often an idle feed gets a comment line, so proxies and clients see the connection alive. */
export const KEEP_ALIVE_MS = 15_000;
/** How long a message waits for the read models to include its event before it goes out anyway. */
export const PROJECTED_WAIT_MS = 5_000;
/** Past this many messages waiting for the read models, new ones go out without waiting. */
const MAX_WAITING = 10_000;
const RETRY_AFTER_SECONDS = '5';

/** Where a feed's text goes: the HTTP answer of one client. */
export interface FeedSink {
  write(chunk: string): void;
  /** Ends the client's answer: the service is stopping, or the feed's API key was revoked. */
  end(): void;
}

export interface LiveFeedHandle {
  /** Resolves once the feed reads the log: every event stored after this is sent to it. */
  ready: Promise<void>;
  /** Releases the feed (the client went away). Safe to call more than once. */
  close(): void;
}

interface Waiting {
  seq: number;
  orgId: string;
  frame: string;
  /** Sent by then even if the read models have not caught up. */
  deadline: number;
}

interface Reading {
  abort: AbortController;
  ready: Promise<void>;
}

export interface LiveFeedsOptions {
  perOrg: number;
  max: number;
  keepAliveMs?: number;
  projectedWaitMs?: number;
}

/**
 * The live feeds of one API process: one reader of EVENTS (through the process's
 * events tap) for however many clients are connected, started with the first and
 * stopped with the last, from the log's end (no backlog). Each event becomes one
 * message for the feeds of its own organization only.
 *
 * A message goes out once the read models include its event (or after
 * PROJECTED_WAIT_MS), so a client that fetches the resource it names through the
 * API sees the change the message announces.
 */
export function createLiveFeeds(
  deps: { nats: Nats; watermark: { readonly seq: number; waitFor(seq: number, timeoutMs: number): Promise<boolean> }; log: (m: string) => void },
  opts: LiveFeedsOptions,
) {
  const keepAliveMs = opts.keepAliveMs ?? KEEP_ALIVE_MS;
  const projectedWaitMs = opts.projectedWaitMs ?? PROJECTED_WAIT_MS;
  /** Organization → its feeds, each with the public id of the API key it was opened with. */
  const feeds = new Map<string, Map<FeedSink, string>>();
  let open = 0;
  let closed = false;
  let reading: Reading | undefined;
  let keepAlive: NodeJS.Timeout | undefined;
  /** Readers being stopped and the message pump: awaited by close(). */
  const running = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    running.add(p);
    void p.finally(() => running.delete(p));
  };

  const waiting: Waiting[] = [];
  let pumping = false;
  /** Ends the pump's wait for the read models when reading stops. */
  let stopWaiting: (() => void) | undefined;

  const deliver = (w: Waiting) => {
    for (const sink of feeds.get(w.orgId)?.keys() ?? []) sink.write(w.frame);
  };

  const pump = () => {
    if (pumping) return;
    pumping = true;
    track((async () => {
      try {
        while (waiting.length) {
          const head = waiting[0]!;
          if (deps.watermark.seq < head.seq) {
            await Promise.race([
              deps.watermark.waitFor(head.seq, Math.max(0, head.deadline - Date.now())),
              new Promise<void>((r) => (stopWaiting = r)),
            ]);
            stopWaiting = undefined;
          }
          const projected = deps.watermark.seq;
          const now = Date.now();
          while (waiting.length && (waiting[0]!.seq <= projected || waiting[0]!.deadline <= now || waiting.length > MAX_WAITING)) deliver(waiting.shift()!);
        }
      } finally {
        pumping = false;
      }
    })());
  };

  /**
   * `evt.<org>.…`; API key events (`evt.apikey.<pk>`) and partition owners' commits
   * (`evt.partition.<p>`, `evt.monitor-partition.<p>`, many organizations each) name
   * their organization only inside.
   */
  const subjectOrg = (subject: string) => subject.split('.', 2)[1];
  const sharedSubject = (token: string | undefined) => token === 'apikey' || token === 'partition' || token === 'monitor-partition';

  const take = (item: TapItem) => {
    const fromSubject = subjectOrg(item.subject);
    if (!sharedSubject(fromSubject) && (!fromSubject || !feeds.has(fromSubject))) return;
    let events: JetcronEvent[];
    try {
      // Shared with the process's other readers of the tap, which decode it the same way.
      events = (item.decoded ??= decodeEvents(item.data)) as JetcronEvent[];
    } catch {
      return;
    }
    for (const event of events) takeEvent(item, fromSubject, event);
  };

  const takeEvent = (item: TapItem, fromSubject: string | undefined, event: JetcronEvent) => {
    if (!feeds.has(event.org_id) || (!sharedSubject(fromSubject) && fromSubject !== event.org_id)) return;
    // A feed is authenticated once, when it opens: it lasts only as long as its key.
    if (event.type === 'ApiKeyRevoked') endFeedsOf(event.org_id, event.data.key.public_id);
    let message;
    try {
      message = liveMessage(event);
    } catch (err) {
      // An event type this version does not know (written by a newer one): no message.
      deps.log(`live feeds: seq ${item.seq}: ${(err as Error).message}`);
      return;
    }
    if (!message) return;
    waiting.push({ seq: item.seq, orgId: event.org_id, frame: sseFrame(message), deadline: Date.now() + projectedWaitMs });
    pump();
  };

  const startReading = (): Reading => {
    const abort = new AbortController();
    // From the log's end: a feed shows what happens from now on.
    const start = within(deps.nats.jsm.streams.info(STREAMS.events.name)).then((info) => info.state.last_seq + 1);
    track(start.then(async (startSeq) => {
      for await (const item of followEvents(deps.nats, { startSeq, signal: abort.signal, log: deps.log, name: 'live-feeds', maxMessages: 500 })) {
        if (abort.signal.aborted) break;
        take(item);
      }
    }).catch((err: Error) => {
      if (!abort.signal.aborted) deps.log(`live feeds: reading EVENTS failed: ${err.message}`);
    }));
    keepAlive = setInterval(() => {
      for (const sinks of feeds.values()) for (const sink of sinks.keys()) sink.write(': keep-alive\n\n');
    }, keepAliveMs);
    keepAlive.unref();
    return { abort, ready: start.then(() => {}) };
  };

  const stopReading = () => {
    reading?.abort.abort();
    reading = undefined;
    clearInterval(keepAlive);
    waiting.length = 0;
    stopWaiting?.();
  };

  const endFeedsOf = (orgId: string, keyId: string) => {
    for (const [sink, key] of [...(feeds.get(orgId) ?? [])]) {
      if (key !== keyId) continue;
      release(orgId, sink);
      sink.end();
    }
  };

  const release = (orgId: string, sink: FeedSink) => {
    const sinks = feeds.get(orgId);
    if (!sinks?.delete(sink)) return;
    open--;
    if (sinks.size === 0) feeds.delete(orgId);
    if (open === 0) stopReading();
  };

  return {
    /**
     * Opens a feed of `orgId`, for the API key `keyId`, writing to `sink`. Throws 429
     * past the organization's or the process's bound, 503 while the service stops.
     */
    open(orgId: string, keyId: string, sink: FeedSink): LiveFeedHandle {
      if (closed) throw new ApiError(503, 'The service is stopping', null, { 'Retry-After': '1' });
      const sinks = feeds.get(orgId) ?? new Map<FeedSink, string>();
      if (sinks.size >= opts.perOrg) {
        throw new ApiError(429, `Too many live feeds open for this organization (at most ${opts.perOrg})`, null, { 'Retry-After': RETRY_AFTER_SECONDS });
      }
      if (open >= opts.max) throw new ApiError(429, 'Too many live feeds open on this server', null, { 'Retry-After': RETRY_AFTER_SECONDS });
      sinks.set(sink, keyId);
      feeds.set(orgId, sinks);
      open++;
      reading ??= startReading();
      const current = reading;
      const ready = current.ready.catch((err: unknown) => {
        // The log could not be reached: this feed fails, and the next one tries afresh.
        if (reading === current) stopReading();
        throw err;
      });
      return { ready, close: () => release(orgId, sink) };
    },
    /** Feeds open in this process. */
    get count() {
      return open;
    },
    /** Whether this process reads EVENTS for its feeds (only while one is open). */
    get reading() {
      return reading !== undefined;
    },
    /** Ends every feed and stops reading. */
    async close(): Promise<void> {
      closed = true;
      for (const [orgId, sinks] of [...feeds]) {
        for (const sink of [...sinks.keys()]) {
          release(orgId, sink);
          sink.end();
        }
      }
      stopReading();
      await Promise.allSettled([...running]);
    },
  };
}

export type LiveFeeds = ReturnType<typeof createLiveFeeds>;
