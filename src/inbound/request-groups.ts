import { newId } from '../lib/ids.ts';
import { createTurnGroups } from '../lib/turn-groups.ts';
import type { Nats } from '../nats/connection.ts';
import { currentTraceparent } from '../telemetry/tracing.ts';
import { encodeStoredGroup, type InboundRequestMeta, type StoredRequest } from './stored-request.ts';

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

/**
 * The inbound requests of one turn of the event loop, per endpoint (INBOUND subject), in
 * one INBOUND message, in arrival order: one stored message and one ack for the turn,
 * where there was one per request. Each request waits for its group's ack, so a 200
 * still means stored; a group is stored whole or not at all (each of its requests then
 * answers the failure).
 */
export function createRequestGroups(nats: Nats) {
  const groups = createTurnGroups<StoredRequest>(
    { maxCount: MAX_REQUESTS, maxBytes: MAX_BYTES, maxHead: MAX_ROUTES },
    () => newId('cmd'),
    // The group's id as msg id: it is published once, so this only names it; no header
    // traceparent: each request carries its own in its metadata.
    (g) => {
      const { data, headers } = encodeStoredGroup(g.items);
      return nats.publish(g.key, data, { msgId: g.id, traceparent: undefined, headers });
    },
  );

  return {
    /** Resolves with the INBOUND sequence of the message holding `request` once it is stored. */
    store(subject: string, request: StoredRequest): Promise<number> {
      const size = sizeOf(request);
      const traceparent = currentTraceparent();
      const head = routeSizeOf(request.meta) + (traceparent ? traceparent.length + 16 : 0);
      const group = groups.join(subject, size, head);
      group.items.push(traceparent ? { meta: { ...request.meta, traceparent }, body: request.body } : request);
      group.count++;
      group.bytes += size;
      group.head += head;
      return group.stored;
    },
  };
}
