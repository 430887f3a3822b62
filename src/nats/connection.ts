import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';

export interface Nats {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
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
  return {
    nc,
    js,
    jsm,
    async close() {
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
