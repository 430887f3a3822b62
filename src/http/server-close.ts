import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** How long a connection busy with an answer may hold the shutdown open. */
const BUSY_GRACE_MS = 5000;

/**
 * Closing `server`, installed when it is created: idle keep-alive connections close
 * at once, and so do connections that have not sent a request yet, which Node 20's
 * `closeIdleConnections` leaves open (an HTTP client opens one ahead, e.g. undici after
 * a request it aborted, or a browser's preconnect); they would hold the close for the
 * whole grace. A connection busy with an answer gets BUSY_GRACE_MS.
 */
export function closableServer(server: Server): () => Promise<void> {
  const open = new Set<Socket>();
  const asked = new WeakSet<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req) => asked.add(req.socket));
  return () => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    for (const socket of open) if (!asked.has(socket)) socket.destroy();
    setTimeout(() => server.closeAllConnections(), BUSY_GRACE_MS).unref();
  });
}
