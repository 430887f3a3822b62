import { SUBJECTS } from '../../streams/subjects.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import type { EventStore } from '../commands/store.ts';
import { newId } from '../lib/ids.ts';
import { isoTime } from '../lib/iso-time.ts';
import type { Log } from '../lib/logger.ts';
import { createTurnGroups, type TurnGroup } from '../lib/turn-groups.ts';
import type { Nats } from '../nats/connection.ts';
import { currentTraceparent, openSpan, SpanKind, type SpanScope } from '../telemetry/tracing.ts';
import { plannedAtReceipt, receivedEvent, recordedAtReceipt } from './pipeline.ts';
import { encodeStoredGroup, encodeWholeGroup, ROUTED_HEADER, type InboundRequestMeta, type StoredRequest } from './stored-request.ts';

/**
 * A group closes at this many requests, bytes (INBOUND's max_msg_size is 2 MiB) or bytes
 * of routes (its header: JetStream takes at most 64 KiB); the next request opens
 * another. A request alone always fits: its body is at most 1 MiB, its route (the
 * request line and a forwarded address, under Node's 16 KiB limit of a request's head) far less.
 */
const MAX_REQUESTS = 256;
const MAX_BYTES = 1024 * 1024;
const MAX_ROUTES = 48 * 1024;

/** What a request adds to its group's payload, near enough: its body and its header pairs. */
const sizeOf = (r: StoredRequest) => r.body.length + 4 + r.meta.headers.reduce((n, [k, v]) => n + k.length + v.length + 6, 0);

/** What a request's route adds to its group's header, near enough: the fixed fields and the variable ones. */
function routeSizeOf(meta: InboundRequestMeta): number {
  let n = 260 + meta.path.length + meta.query.length + (meta.source_ip?.length ?? 0);
  if (meta.rejected) n += 40 + (meta.rejected.reason?.length ?? 0);
  for (const line of meta.verify_logs ?? []) n += line.length + 3;
  return n;
}

/** Where a stored request is: its event in EVENTS, or its message in INBOUND that the router has yet to record. */
export interface StoredAt {
  log: 'events' | 'inbound';
  seq: number;
}

/** A request the receiver records itself: the endpoint it was received for decides its deliveries. */
type RecordedRequest = StoredRequest & { endpoint: Endpoint };

export interface RequestGroupsDeps {
  nats: Nats;
  /**
   * Requests no hook touches (`plannedAtReceipt`) are recorded here: after their group
   * is stored, its `InboundEventReceived` commit is appended to EVENTS before any of
   * them is answered, and the router passes the group over.
   */
  store: EventStore;
  log?: Log | undefined;
}

/**
 * The inbound requests of one turn of the event loop, per endpoint (INBOUND subject), in
 * one INBOUND message, in arrival order: one stored message and one ack for the turn,
 * where there was one per request. Each request waits for its group's ack, so a 200
 * still means stored; a group is stored whole or not at all (each of its requests then
 * answers the failure).
 */
export function createRequestGroups(deps: RequestGroupsDeps) {
  const { nats, store } = deps;
  const limits = { maxCount: MAX_REQUESTS, maxBytes: MAX_BYTES, maxHead: MAX_ROUTES };
  const routed = createTurnGroups<StoredRequest>(
    limits,
    () => newId('cmd'),
    // The group's id as msg id: it is published once, so this only names it; no header
    // traceparent: each request carries its own in its metadata.
    (g) => {
      const { data, headers } = encodeStoredGroup(g.items);
      return nats.publish(g.key, data, { msgId: g.id, traceparent: undefined, headers });
    },
  );
  const recorded = createTurnGroups<RecordedRequest>(limits, () => newId('cmd'), (g) => storeAndRecord(store, g));

  /**
   * Stores a group no hook touches, then appends its events as one commit on one of the
   * organization's shared subjects, expecting nothing of the subject (a retried append
   * is one message by its msg id). Its requests are answered after both: a kill -9
   * between them leaves a stored group that nothing answered 2xx and nothing routes.
   */
  async function storeAndRecord(store: EventStore, g: TurnGroup<RecordedRequest>): Promise<number> {
    // Resolves with the EVENTS sequence of the group's commit: what a read of its organization waits for.
    const orgId = g.items[0]!.meta.org_id;
    const subject = SUBJECTS.inboundReceived(orgId, g.id);
    const seq = await nats.publish(g.key, encodeWholeGroup(g.items), { msgId: g.id, traceparent: undefined, headers: { [ROUTED_HEADER]: subject } });
    const at = isoTime(Date.now());
    const scopes: SpanScope[] = [];
    const events: InboundEventEvent[] = [];
    for (const { meta, endpoint } of g.items) {
      const delivery = plannedAtReceipt(endpoint, meta)!;
      // A span per request continuing the receiver's trace, as the router opens: the event carries it on.
      const scope = openSpan('route inbound', {
        kind: SpanKind.CONSUMER, traceparent: meta.traceparent, continueOnly: true,
        attributes: () => ({ 'jetcron.org_id': meta.org_id, 'jetcron.endpoint_id': meta.endpoint_id, 'jetcron.inbound_event_id': meta.id }),
      });
      const event = receivedEvent(meta, seq, endpoint, delivery, delivery, at);
      const traceparent = scope.run(() => store.traceparent?.());
      events.push(traceparent ? { ...event, traceparent } : event);
      scopes.push(scope);
      deps.log?.debug?.('inbound event routed', () => ({
        org_id: meta.org_id, endpoint_id: meta.endpoint_id, inbound_event_id: meta.id, outcome: delivery.outcome, executions: delivery.executions.map((x) => x.execution_id),
      }));
    }
    // One request's commit is appended in its span (a group's outside the spans, as the router does).
    const append = () => (events.length === 1 ? scopes[0]!.run(() => store.appendCommit(subject, events, undefined)) : store.appendCommit(subject, events, undefined));
    try {
      // Once more on a failure: the msg id makes a first append that was stored after all count once.
      return await append().catch(append);
    } finally {
      for (const s of scopes) s.end();
    }
  }

  return {
    /**
     * Resolves once `request` is stored, with where a read of its organization finds it:
     * its event's EVENTS sequence when it was recorded here (an endpoint no hook
     * touches), else the INBOUND sequence of its message, which the router records.
     */
    store(subject: string, request: StoredRequest, endpoint?: Endpoint): Promise<StoredAt> {
      const size = sizeOf(request);
      const traceparent = currentTraceparent();
      const head = routeSizeOf(request.meta) + (traceparent ? traceparent.length + 16 : 0);
      const meta = traceparent ? { ...request.meta, traceparent } : request.meta;
      if (endpoint && recordedAtReceipt(endpoint)) {
        // Written whole in its payload: no routes header to bound.
        const group = recorded.join(subject, size);
        group.items.push({ meta, body: request.body, endpoint });
        return joined(group, size, 0).then((seq) => ({ log: 'events', seq }));
      }
      const group = routed.join(subject, size, head);
      group.items.push(traceparent ? { meta, body: request.body } : request);
      return joined(group, size, head).then((seq) => ({ log: 'inbound', seq }));
    },
  };
}

function joined(group: TurnGroup<unknown>, size: number, head: number): Promise<number> {
  group.count++;
  group.bytes += size;
  group.head += head;
  return group.stored;
}
