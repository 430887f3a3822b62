import http from 'node:http';
import { verifySignature } from '../../src/dispatchers/signing.ts';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  at: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body's bytes exactly as received. */
  raw: Buffer;
}

export type Responder = (req: ReceivedRequest, index: number) => {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  delayMs?: number;
  /** The answer waits for this too (an order between requests, not a time). */
  until?: Promise<unknown>;
};

/** A real HTTP server on 127.0.0.1 that records what it receives and answers as told. */
export async function startTarget(responder: Responder = () => ({ status: 200, body: 'ok' })) {
  const received: ReceivedRequest[] = [];
  let respond = responder;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const r: ReceivedRequest = { at: Date.now(), method: req.method!, path: req.url!, headers: req.headers, body: raw.toString('utf8'), raw };
      received.push(r);
      const out = respond(r, received.length - 1);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(out.status ?? 200, out.headers ?? {});
        res.end(out.body ?? '');
      };
      const delayed = () => (out.delayMs ? setTimeout(send, out.delayMs) : send());
      if (out.until) void out.until.then(delayed, delayed);
      else delayed();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    setResponder(fn: Responder) {
      respond = fn;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

/** Whether a received request carries a valid X-Jetcron-Signature for `executionId` under `secret`. */
export function signedWith(req: Pick<ReceivedRequest, 'body'> & { headers: Record<string, unknown> }, secret: string, executionId: string): boolean {
  return verifySignature({
    secret,
    signature: String(req.headers['x-jetcron-signature']),
    timestamp: Number(req.headers['x-jetcron-timestamp']),
    executionId,
    body: req.body,
    nowMs: Date.now(),
  });
}
