import express from 'express';
import { sql } from 'kysely';
import { notFound } from '../lib/errors.ts';
import { authenticate, rateLimit } from './auth.ts';
import type { ApiDeps } from './context.ts';
import { errorMiddleware } from './errors.ts';
import { keepRawBody } from './idempotency.ts';
import { openApiDocument } from './openapi.ts';
import { executionRoutes } from './routes/executions.ts';
import { organizationRoutes } from './routes/organization.ts';
import { batchRoutes } from './routes/batch.ts';
import { laneCancelRoutes } from './routes/lane-cancel.ts';
import { monitorRoutes, pingRoutes } from './routes/monitors.ts';
import { endpointRoutes } from './routes/endpoints.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { syncRoutes } from './routes/sync.ts';
import { taskRoutes } from './routes/tasks.ts';

async function healthy(deps: ApiDeps): Promise<boolean> {
  const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error('timeout')), 2000).unref())]);
  try {
    await within(deps.nats.nc.flush());
    await within(sql`SELECT 1`.execute(deps.db));
    return !deps.nats.nc.isClosed();
  } catch {
    return false;
  }
}

/** `rootUrl` is read per request: with PORT=0 the real port is known only after listen. */
export function createApp(deps: ApiDeps, log: (m: string) => void, rootUrl: () => string = () => deps.config.publicUrl ?? `http://${deps.config.host}:${deps.config.port}`) {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', 'loopback');

  app.use((req, res, next) => {
    const t0 = performance.now();
    res.on('finish', () => {
      const route = (req.route?.path as string | undefined) ?? 'unmatched';
      deps.metrics.inc('jetcron_http_requests_total', 'HTTP requests answered', { method: req.method, route, status: res.statusCode });
      deps.metrics.observe('jetcron_http_request_duration_seconds', 'HTTP request duration', (performance.now() - t0) / 1000, { method: req.method });
    });
    next();
  });

  app.get('/healthz', (_req, res, next) => {
    healthy(deps).then((ok) => res.status(ok ? 200 : 503).json({ status: ok ? 'ok' : 'unavailable' }), next);
  });
  app.get('/metrics', (_req, res) => {
    res.type('text/plain; version=0.0.4').send(deps.metrics.render());
  });

  const root = deps.config.publicUrl ?? `http://${deps.config.host}:${deps.config.port}`;
  app.get('/api/v1/openapi.json', (_req, res) => void res.json(openApiDocument(`${root}/api/v1`)));

  app.use(pingRoutes(deps));

  const api = express.Router();
  // Key and rate limit first: a stranger's or an over-limit body is never parsed.
  api.use(authenticate(deps));
  api.use(rateLimit(deps));
  // 1 MiB leaves room for a 256 KB task body plus the other fields; the body rule itself is checked per field.
  // keepRawBody: the Idempotency-Key fingerprint hashes the body as sent.
  // The batch route parses its own, larger body; it sits before the general parser.
  api.use(batchRoutes(deps));
  api.use(express.json({ limit: '1mb', type: () => true, strict: false, verify: keepRawBody }));
  api.use(laneCancelRoutes(deps));
  api.use(taskRoutes(deps));
  api.use(scheduleRoutes(deps));
  api.use(monitorRoutes(deps, rootUrl));
  api.use(endpointRoutes(deps, rootUrl));
  api.use(syncRoutes(deps));
  api.use(executionRoutes(deps));
  api.use(organizationRoutes(deps));
  api.use((_req, _res, next) => next(notFound('Not found')));
  app.use('/api/v1', api);

  app.use((_req, res) => void res.status(404).json({ error: { message: 'Not found', field: null } }));
  app.use(errorMiddleware(log));
  return app;
}
