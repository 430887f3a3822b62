import type { NatsConnection } from '@nats-io/transport-node';

/**
 * A round trip to the server (PING/PONG) that every caller of one event-loop turn
 * shares. Resolved, it means the server has handled everything this connection sent
 * before it (a core publish has been routed to its subscribers), and this client has
 * handled every message the server sent it before the PONG. The PING is queued at the
 * end of the turn, after whatever the callers published in it. A connection that is
 * down resolves it too: the guarantee is lost, the caller is not stuck.
 */
export function createBarrier(nc: NatsConnection): () => Promise<void> {
  let next: Promise<void> | undefined;
  return () => {
    next ??= new Promise<void>((resolve) => {
      setImmediate(() => {
        next = undefined;
        nc.flush().then(resolve, () => resolve());
      });
    });
    return next;
  };
}
