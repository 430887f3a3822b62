import { newId } from '../lib/ids.ts';
import { createTurnGroups } from '../lib/turn-groups.ts';
import type { Nats } from '../nats/connection.ts';
import { currentTraceparent } from '../telemetry/tracing.ts';
import { encodeStoredGroup, type StoredRequest } from './stored-request.ts';

/**
 * A group closes at this many requests or bytes (INBOUND's max_msg_size is 2 MiB); the
 * next request opens another. A request alone always fits: its body is at most 1 MiB.
 */
const MAX_REQUESTS = 256;
const MAX_BYTES = 1024 * 1024;

/** What a request adds to its group's message, near enough: its body and its metadata line. */
const sizeOf = (r: StoredRequest) => r.body.length + 256 + r.meta.headers.reduce((n, [k, v]) => n + k.length + v.length + 6, 0);

/**
 * The inbound requests of one turn of the event loop, per endpoint (INBOUND subject), in
 * one INBOUND message, in arrival order: one stored message and one ack for the turn,
 * where there was one per request. Each request waits for its group's ack, so a 200
 * still means stored; a group is stored whole or not at all (each of its requests then
 * answers the failure).
 */
export function createRequestGroups(nats: Nats) {
  const groups = createTurnGroups<StoredRequest>(
    { maxCount: MAX_REQUESTS, maxBytes: MAX_BYTES },
    () => newId('cmd'),
    // The group's id as msg id: it is published once, so this only names it; no header
    // traceparent: each request carries its own in its metadata.
    (g) => nats.publish(g.key, encodeStoredGroup(g.items), { msgId: g.id, traceparent: undefined }),
  );

  return {
    /** Resolves with the INBOUND sequence of the message holding `request` once it is stored. */
    store(subject: string, request: StoredRequest): Promise<number> {
      const size = sizeOf(request);
      const group = groups.join(subject, size);
      const traceparent = currentTraceparent();
      group.items.push(traceparent ? { meta: { ...request.meta, traceparent }, body: request.body } : request);
      group.count++;
      group.bytes += size;
      return group.stored;
    },
  };
}
