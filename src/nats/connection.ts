import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
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
  publish(subject: string, data: Uint8Array, opts?: { msgId?: string; expectLastSubjectSeq?: number; batch?: boolean }): Promise<number>;
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
  const js = jetstream(nc, { timeout: 10_000 });
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  let publisher: AckedPublisher | undefined;
  return {
    nc,
    js,
    jsm,
    publish(subject, data, opts = {}) {
      publisher ??= createAckedPublisher({ nc });
      return publisher.publish(subject, data, opts.msgId, opts.expectLastSubjectSeq, opts.batch);
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
