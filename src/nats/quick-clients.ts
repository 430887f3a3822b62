import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Nats } from './connection.ts';

/**
 * JetStream clients with a 2 s timeout for calls on paths that decide when work runs
 * (creating a consumer, checking and deleting a timer). During a leader election they
 * fail fast and are tried again, instead of waiting out the service-wide 10 s API
 * timeout while the new leader is already there.
 */
const QUICK_TIMEOUT_MS = 2_000;

const clients = new WeakMap<NatsConnection, JetStreamClient>();
const managers = new WeakMap<NatsConnection, Promise<JetStreamManager>>();

export function quickClient(nats: Nats): JetStreamClient {
  let js = clients.get(nats.nc);
  if (!js) clients.set(nats.nc, (js = jetstream(nats.nc, { timeout: QUICK_TIMEOUT_MS })));
  return js;
}

export function quickManager(nats: Nats): Promise<JetStreamManager> {
  let jsm = managers.get(nats.nc);
  if (!jsm) {
    // No API-level check: `jetstreamManager` would make a request only to verify JetStream is there.
    jsm = jetstreamManager(nats.nc, { timeout: QUICK_TIMEOUT_MS, checkAPI: false });
    managers.set(nats.nc, jsm);
  }
  return jsm;
}
