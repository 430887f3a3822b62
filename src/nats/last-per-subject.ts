import { AckPolicy, DeliverPolicy, type JsMsg } from '@nats-io/jetstream';
import { STREAMS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';
import { quickClient, quickManager } from './quick-clients.ts';

/**
 * The last message of every EVENTS subject matching `filter`, stored up to the log's end
 * as it is now; returns that end. One consumer delivering the last per subject, in
 * sequence order, ended once it has delivered what was pending when it was made
 * (messages past the end are left to whoever reads on from it), or when `signal` aborts
 * (the caller then stops). For many subjects (every monitor, every schedule), where a
 * direct get per subject (`last-of-each.ts`) would not do.
 */
export async function lastPerSubject(nats: Nats, filter: string, signal: AbortSignal, take: (m: JsMsg) => void): Promise<number> {
  const end = (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
  const jsm = await quickManager(nats);
  // Ephemeral, in memory, gone a minute after it is last used should the delete below not happen.
  const ci = await jsm.consumers.add(STREAMS.events.name, {
    deliver_policy: DeliverPolicy.LastPerSubject, filter_subject: filter, ack_policy: AckPolicy.None,
    mem_storage: true, num_replicas: 1, inactive_threshold: 60_000_000_000,
  });
  try {
    if (ci.num_pending === 0) return end;
    const messages = await quickClient(nats).consumers.getConsumerFromInfo(ci).consume({ max_messages: 1000, expires: 2_000 });
    const stop = () => void messages.close().catch(() => {});
    signal.addEventListener('abort', stop, { once: true });
    try {
      for await (const m of messages) {
        if (m.seq <= end) take(m);
        // Past the end, every subject's last up to it came before (the server hands them
        // on in sequence order): writes arriving all along need not let it run dry first.
        if (m.seq >= end || m.info.pending === 0) break;
      }
    } finally {
      signal.removeEventListener('abort', stop);
      stop();
    }
    return end;
  } finally {
    await jsm.consumers.delete(STREAMS.events.name, ci.name).catch(() => {});
  }
}
