import type { IncomingMessage, ServerResponse } from 'node:http';
import { PING_BODY_LIMIT } from '../commands/monitor/types.ts';
import type { Metrics } from '../lib/metrics.ts';
import { inServerSpan } from '../telemetry/server-span.ts';
import { errorAnswer } from './errors.ts';
import { API_BODY_LIMIT, hasBody, readRaw } from './request-body.ts';
import { receivedPing, type PingAnswer, type Pinger } from './routes/pings.ts';
import { sourceIp } from './source-ip.ts';

/**
 * What this receiver takes: a monitor token, maybe a signal, maybe `?rid=` alone. The
 * characters allowed leave nothing to percent-decode; anything else (a ping by key
 * and slug, another query, a trailing slash) goes on to express's ping routes.
 */
const PATH = /^\/ping\/(pm_[0-9a-z]{32})(?:\/(start|fail|log|[0-9]{1,10}))?(?:\?rid=([0-9A-Za-z-]{1,64}))?$/;
const LIMIT = String(PING_BODY_LIMIT);

/**
 * Pings by token, the hot path of heartbeats (a monitor pinged every minute, by many
 * monitors), taken before express as inbound URLs are: the same answers as the ping
 * routes (`routes/pings.ts`, through the same `Pinger`), the same body rules
 * (`readRaw`: 1 MiB, else 413), the same metrics and server span, without express's
 * request setup, middleware chain and router. A request with a `Content-Encoding` is
 * left to express, whose body reader decodes it.
 */
export function createPingReceiver(deps: { pinger: Pinger; metrics: Metrics; log: (m: string) => void }) {
  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Ping-Body-Limit': LIMIT, ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text); // HEAD: node:http writes no body
  };

  async function ping(req: IncomingMessage, token: string, suffix: string | null, rid: string | null): Promise<PingAnswer> {
    const body = hasBody(req) ? await readRaw(req, API_BODY_LIMIT) : Buffer.alloc(0);
    return deps.pinger.byToken(() => receivedPing(req.method!, sourceIp(req, false), req.headers['user-agent'], body, rid), token, suffix);
  }

  return {
    /** Takes the request when it is a ping it serves; false = not one, pass it on. */
    handle(req: IncomingMessage, res: ServerResponse): boolean {
      const method = req.method;
      if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') return false;
      if (req.headers['content-encoding'] !== undefined) return false;
      const m = PATH.exec(req.url ?? '');
      if (!m) return false;
      const route = m[2] === undefined ? '/ping/:first' : '/ping/:first/:second';
      const t0 = performance.now();
      res.on('finish', () => {
        const labels = { method, route, status: res.statusCode };
        deps.metrics.httpRequests.inc(labels);
        deps.metrics.httpRequestDuration.observe(labels, (performance.now() - t0) / 1000);
      });
      inServerSpan(req, res, () => ({ route }), () => {
        ping(req, m[1]!, m[2] ?? null, m[3] ?? null).then(
          (answer) => send(res, answer.status, answer.body),
          (err: unknown) => {
            if (res.headersSent) return void res.destroy();
            const e = errorAnswer(err, deps.log);
            send(res, e.status, e.body, e.headers);
          },
        );
      });
      return true;
    },
  };
}
