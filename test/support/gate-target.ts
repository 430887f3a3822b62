import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GateRequest {
  path: string;
  executionId: string;
  at: number;
  /** Answers it (200 unless told). */
  release(status?: number): void;
}

/**
 * A target that holds every request until the test releases it, and counts how many
 * are open at once (a request closed by its sender, a killed process, counts as ended).
 * Lets a test say "at most N at once, and N reached" by order, not by time.
 */
export async function startGateTarget(onRequest: (req: GateRequest, open: number) => void = () => {}) {
  const received: GateRequest[] = [];
  let open = 0;
  let maxOpen = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        open--;
      };
      res.on('close', end);
      open++;
      maxOpen = Math.max(maxOpen, open);
      const r: GateRequest = {
        path: req.url!,
        executionId: String(req.headers['x-jetcron-execution-id']),
        at: Date.now(),
        release(status = 200) {
          if (res.destroyed || res.writableEnded) return;
          end();
          res.writeHead(status).end('ok');
        },
      };
      received.push(r);
      onRequest(r, open);
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    open: () => open,
    maxOpen: () => maxOpen,
    releaseAll() {
      for (const r of received) r.release();
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
