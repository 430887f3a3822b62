import { connect, type NatsConnection } from '@nats-io/transport-node';
import { RequestOne } from '@nats-io/nats-core/internal';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { currentTraceparent } from '../telemetry/tracing.ts';
import { createAckedPublisher, type AckedPublisher } from './acked-publisher.ts';

export interface Nats {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /**
   * JetStream publish that waits for the ack, shared by the process (see
   * `createAckedPublisher`): resolves with the sequence; `expectLastSubjectSeq`
   * guards the write; a refusal carries JetStream's `api_error`.
   */
  /**
   * `traceparent`: the W3C trace context to send in the message's headers; by default
   * the active span's, when tracing is on (src/telemetry/tracing.ts). `headers`: more
   * headers of the message's own.
   */
  publish(subject: string, data: Uint8Array, opts?: { msgId?: string; expectLastSubjectSeq?: number; batch?: boolean; traceparent?: string | undefined; headers?: Record<string, string> | undefined }): Promise<number>;
  close(): Promise<void>;
}

export async function connectNats(url: string, name: string): Promise<Nats> {
  const nc = await connect({
    servers: url.split(',').map((s) => s.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    // Async stack capture builds an Error per request: a measurable share of CPU on hot paths.
    noAsyncTraces: true,
  });
  flushOncePerLoopTurn(nc);
  quietAnsweredRequests();
  const js = jetstream(nc, { timeout: 10_000 });
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  let publisher: AckedPublisher | undefined;
  return {
    nc,
    js,
    jsm,
    publish(subject, data, opts = {}) {
      publisher ??= createAckedPublisher({ nc });
      return publisher.publish(subject, data, opts.msgId, opts.expectLastSubjectSeq, opts.batch, 'traceparent' in opts ? opts.traceparent : currentTraceparent(), opts.headers);
    },
    async close() {
      publisher?.close();
      if (nc.isClosed()) return;
      await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * Calls `forget` whenever the connection drops or comes back: core messages
 * published meanwhile are lost to a subscription, so caches fed by one start afresh.
 */
export function onConnectionGap(nats: Nats, forget: () => void): void {
  void (async () => {
    for await (const status of nats.nc.status()) {
      if (status.type === 'reconnect' || status.type === 'disconnect') forget();
    }
  })().catch(() => {});
}

/**
 * nats.js writes its outbound buffer to the socket at the end of each microtask run,
 * so every I/O callback that publishes (an HTTP request, a reply, a pulled message)
 * costs a socket write of its own, and on loopback a write also runs the receiver's
 * TCP path. Deferring that flush to `setImmediate` sends everything one turn of the
 * event loop published in one write, in the same order, a fraction of a millisecond
 * later. `flush()` and `drain()` still work: their PING goes out in the same write and
 * the PONG comes back after it. Only a client whose protocol handler looks as expected
 * is changed; any other keeps the library's own flushing.
 */
function flushOncePerLoopTurn(nc: NatsConnection): void {
  const protocol = (nc as unknown as { protocol?: { flushPending?: () => void } }).protocol;
  if (!protocol || typeof protocol.flushPending !== 'function') return;
  const flushNow = protocol.flushPending.bind(protocol);
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    flushNow();
  };
  protocol.flushPending = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };
}

/**
 * nats.js ends an answered request (a direct get, a JetStream API call, a KV get) by
 * calling its `cancel()`, which rejects the already settled promise with a new
 * `RequestError`: an Error and its stack built per answer and thrown away, ~9% of the
 * scheduler process's CPU in the monitors benchmark (deadline fires are four requests
 * each). Once a request has its answer, ending it here only stops its timer and removes
 * it from the connection's request map, as `cancel()` does, without the Error. Changed
 * once per process, and only where the request class looks as expected; a cancel
 * before an answer (a timeout, a closed connection) is the library's own.
 */
let requestsQuieted = false;
function quietAnsweredRequests(): void {
  if (requestsQuieted) return;
  requestsQuieted = true;
  interface Answerable {
    answered?: boolean;
    timer?: { cancel(): void } | null;
    mux?: { cancel(request: unknown): void };
  }
  const proto = RequestOne.prototype as unknown as { resolver?: (...args: unknown[]) => void; cancel?: (err?: Error) => void };
  const { resolver, cancel } = proto;
  if (typeof resolver !== 'function' || typeof cancel !== 'function') return;
  proto.resolver = function (this: Answerable, ...args: unknown[]) {
    this.answered = true;
    return resolver.apply(this, args);
  };
  proto.cancel = function (this: Answerable, err?: Error) {
    if (!this.answered || err !== undefined || typeof this.mux?.cancel !== 'function') return cancel.call(this, err);
    this.timer?.cancel();
    this.mux.cancel(this);
  };
}
