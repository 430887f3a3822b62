import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS, SUBJECTS } from '../../streams/definitions.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import type { Nats } from '../nats/connection.ts';
import { readStream, type StreamItem } from '../nats/event-reader.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { openCheckpoint } from '../nats/throttled-checkpoint.ts';
import { createLease, openLeaseBucket, whileLeased } from '../nats/lease.ts';
import type { EndpointDirectory } from './endpoint-directory.ts';
import { endpointSnapshot, eventRecord, planDelivery, plannedExecutionId, type HooksFor } from './pipeline.ts';
import { decodeStoredRequest, type StoredRequest } from './stored-request.ts';

const CHECKPOINT_KEY = 'inbound-router';
const CHECKPOINT_EVERY_MS = 250;

export interface RouterDeps {
  nats: Nats;
  store: EventStore;
  endpoints: EndpointDirectory;
  hooks: HooksFor;
  clock: Clock;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
}

/**
 * The router: the filter, custom forwarding, transform and route stages. It reads
 * INBOUND in order (one endpoint's requests in arrival order, different endpoints
 * concurrently) and records each request's deliveries as `InboundEventReceived` in
 * EVENTS, where the projector lists it and the translator puts its executions to
 * work. A request whose event is already recorded (a replay after a crash) is
 * skipped: the append expects an empty subject.
 */
export function startInboundRouter(deps: RouterDeps) {
  /** The event recording one request's deliveries, or null when its endpoint is gone. */
  async function decide(item: StreamItem<StoredRequest>): Promise<{ subject: string; event: InboundEventEvent } | null> {
    const { meta } = item.event;
    const endpoint = await deps.endpoints.get(meta.org_id, meta.endpoint_id);
    if (!endpoint) return null; // deleted since: its events went with it
    const delivery = await planDelivery({
      endpoint,
      request: item.event,
      hooks: deps.hooks(endpoint),
      now: meta.received_at,
      executionId: (i) => plannedExecutionId(meta.id, Date.parse(meta.received_at), i),
    });
    const event: InboundEventEvent = {
      type: 'InboundEventReceived',
      id: `${meta.id}.received`,
      at: new Date(deps.clock.now()).toISOString(),
      org_id: meta.org_id,
      data: { event: eventRecord(meta, item.seq, delivery.outcome), endpoint: endpointSnapshot(endpoint), executions: delivery.executions },
    };
    return { subject: SUBJECTS.inboundEvent(meta.org_id, meta.id), event };
  }

  /**
   * One endpoint's requests of a batch, in arrival order: decided one by one, then
   * appended without waiting for each ack. The appends leave on one connection in
   * call order, so EVENTS keeps the arrival order, and a batch costs one round trip
   * instead of one per request.
   */
  async function routeInOrder(items: StreamItem<StoredRequest>[]): Promise<void> {
    const decided = [];
    for (const item of items) {
      const d = await decide(item);
      if (d) decided.push(d);
    }
    await Promise.all(decided.map(({ subject, event }) =>
      deps.store.append(subject, event, 0).catch((err) => {
        // Recorded already (a batch routed again after a crash or a failed append).
        if (!(err instanceof ConcurrencyError)) throw err;
      })));
  }

  async function routeBatch(items: StreamItem<StoredRequest>[]): Promise<void> {
    const bySubject = new Map<string, StreamItem<StoredRequest>[]>();
    for (const item of items) {
      const list = bySubject.get(item.subject);
      if (list) list.push(item);
      else bySubject.set(item.subject, [item]);
    }
    await Promise.all([...bySubject.values()].map(routeInOrder));
  }

  const abort = new AbortController();
  const done = (async () => {
    const kv = await new Kvm(deps.nats.nc).open(KV_BUCKETS.checkpoints.name);
    const lease = createLease(await openLeaseBucket(deps.nats), 'inbound-router', deps.owner, deps.log);
    await whileLeased(lease, abort.signal, deps.log, async (signal) => {
      const checkpoint = await openCheckpoint(kv, CHECKPOINT_KEY, CHECKPOINT_EVERY_MS);
      try {
        const read = {
          stream: STREAMS.inbound.name, decode: decodeStoredRequest, startSeq: checkpoint.position + 1, maxBatch: 500, signal, log: deps.log,
          name: CHECKPOINT_KEY, supervisor: deps.supervisor,
          onSkip: ({ seq }: { seq: number }) => checkpoint.advance(seq),
          reapply: (item: StreamItem<StoredRequest>) => routeBatch([item]),
        };
        await readStream<StoredRequest>(deps.nats, read, async (batch) => {
          await routeBatch(batch);
          await checkpoint.advance(batch[batch.length - 1]!.seq);
        });
      } finally {
        await checkpoint.flush().catch(() => {});
      }
    });
  })();
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}
