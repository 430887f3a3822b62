import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { STREAMS } from '../../streams/definitions.ts';
import type { Nats } from '../nats/connection.ts';
import { quickManager } from '../nats/quick-clients.ts';

const ns = (ms: number) => ms * 1_000_000;

/**
 * A sequence at or before the first EVENTS message stored at or after `since` (the log's
 * own time): a consumer that starts by time counts what is pending from there. Deleted
 * messages in between make it start a little earlier, which the replay's filter on each
 * event's `at` makes harmless. Past the end: the next sequence to be written.
 */
export async function firstSeqSince(nats: Nats, since: Date): Promise<number> {
  const jsm = await quickManager(nats);
  const ci = await jsm.consumers.add(STREAMS.events.name, {
    ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.StartTime, opt_start_time: since.toISOString(),
    mem_storage: true, num_replicas: 1, inactive_threshold: ns(30_000),
  });
  try {
    const last = (await jsm.streams.info(STREAMS.events.name)).state.last_seq;
    return Math.max(1, last - ci.num_pending + 1);
  } finally {
    await jsm.consumers.delete(STREAMS.events.name, ci.name).catch(() => {});
  }
}
