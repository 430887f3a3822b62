import type { IncomingMessage, ServerResponse } from 'node:http';
import { inServerSpan } from '../telemetry/server-span.ts';
import { authenticated, rateTaken } from './auth.ts';
import { objectBody } from './body.ts';
import type { ApiDeps } from './context.ts';
import { errorAnswer } from './errors.ts';
import { API_BODY_LIMIT, readJsonBody } from './request-body.ts';
import { createTaskAnswer } from './routes/tasks.ts';

/** JSON, UTF-8 or no charset: any other type (or a charset to refuse) is express's to answer. */
const JSON_TYPE = /^application\/json\s*(;\s*charset\s*=\s*"?utf-?8"?\s*)?$/i;

/**
 * `POST /api/v1/tasks`, the create path clients call at concurrency, taken before
 * express as pings are (`ping-receiver.ts`): the same steps as the express route, in
 * the same order and through the same functions (`authenticated`, `rateTaken`,
 * `readJsonBody`, `objectBody`, `createTaskAnswer`, `errorAnswer`), the same metrics and
 * server span, without express's request setup, middleware chain, router and `res.json`.
 * What is not plainly that request is left to express: another path or a query, an
 * `Idempotency-Key` (its record wraps the answer), a `Content-Encoding`, a type other
 * than JSON.
 */
export function createTaskReceiver(deps: ApiDeps, log: (m: string) => void) {
  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string>) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  };

  async function create(req: IncomingMessage, headers: Record<string, string>): Promise<unknown> {
    const { orgId } = await authenticated(deps, req.headers.authorization);
    const rate = await rateTaken(deps, orgId);
    Object.assign(headers, rate.headers);
    if (rate.refused) throw rate.refused;
    const { value } = await readJsonBody(req, API_BODY_LIMIT);
    return createTaskAnswer(deps, orgId, objectBody(req.headers, () => true, value));
  }

  return {
    /** Takes the request when it is a plain task create; false = not one, pass it on. */
    handle(req: IncomingMessage, res: ServerResponse): boolean {
      if (req.method !== 'POST' || req.url !== '/api/v1/tasks') return false;
      const h = req.headers;
      if (h['idempotency-key'] !== undefined || h['content-encoding'] !== undefined || !JSON_TYPE.test(h['content-type'] ?? '')) return false;
      const t0 = performance.now();
      res.on('finish', () => {
        const labels = { method: 'POST', route: '/tasks', status: res.statusCode };
        deps.metrics.httpRequests.inc(labels);
        deps.metrics.httpRequestDuration.observe(labels, (performance.now() - t0) / 1000);
      });
      inServerSpan(req, res, () => ({ route: '/api/v1/tasks' }), () => {
        const headers: Record<string, string> = {};
        create(req, headers).then(
          (answer) => send(res, 201, answer, headers),
          (err: unknown) => {
            if (res.headersSent) return void res.destroy();
            const e = errorAnswer(err, log);
            send(res, e.status, e.body, { ...headers, ...e.headers });
          },
        );
      });
      return true;
    },
  };
}
