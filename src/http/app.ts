import type { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import { scriptRoutes } from './routes/scripts.ts';
import { notFound } from '../lib/errors.ts';
import { authenticate, rateLimit } from './auth.ts';
import type { ApiDeps } from './context.ts';
import { errorMiddleware } from './errors.ts';
import { openApiDocument } from './openapi.ts';
import { asyncApiDocument } from '../commands/catalogue.ts';
import { jsonBody } from './request-body.ts';
import { checkPath, checkQuery } from './request-target.ts';
import { metricsHandler } from './metrics-endpoint.ts';
import { executionRoutes } from './routes/executions.ts';
import { jobRoutes } from './routes/jobs.ts';
import { organizationRoutes } from './routes/organization.ts';
import { batchRoutes } from './routes/batch.ts';
import { laneCancelRoutes } from './routes/lane-cancel.ts';
import { monitorRoutes } from './routes/monitors.ts';
import { createPinger, pingRoutes, type Pinger } from './routes/pings.ts';
import { createPingTokens, type PingTokens } from './ping-tokens.ts';
import { createPingReceiver } from './ping-receiver.ts';
import { endpointRoutes } from './routes/endpoints.ts';
import { flowControlRoutes } from './routes/flow-control.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { syncRoutes } from './routes/sync.ts';
import { taskRoutes } from './routes/tasks.ts';
import { channelRoutes } from './routes/channels.ts';
import { liveRoutes } from './routes/live.ts';
import { consoleRoutes } from './console-files.ts';
import { createTaskReceiver } from './task-receiver.ts';
import { inServerSpan } from '../telemetry/server-span.ts';
import type { Log } from '../lib/logger.ts';

/** The ping side of the API: which monitor a token names (filled by the monitor routes' creates too) and the pinger. */
export function createPings(deps: ApiDeps): { tokens: PingTokens; pinger: Pinger } {
  const tokens = createPingTokens(deps.db, deps.directory);
  return { tokens, pinger: createPinger(deps, tokens) };
}

/**
 * The API's request handler: pings by token and plain task creates through receivers
 * ahead of express (`ping-receiver.ts`, `task-receiver.ts`), everything else through
 * express (`createApp`). With debug lines on, every request goes through express,
 * which writes one per request.
 */
export function createRequestHandler(deps: ApiDeps, log: Log, rootUrl?: () => string): (req: IncomingMessage, res: ServerResponse) => void {
  const pings = createPings(deps);
  const app = createApp(deps, log, rootUrl, pings);
  if (log.debug) return app;
  const receiver = createPingReceiver({ pinger: pings.pinger, metrics: deps.metrics, log });
  const creates = createTaskReceiver(deps, log);
  return (req, res) => {
    if (!receiver.handle(req, res) && !creates.handle(req, res)) app(req, res);
  };
}

/**
 * `rootUrl` is read per request: with PORT=0 the real port is known only after listen.
 * `pings`: shared with the ping receiver ahead of express (`ping-receiver.ts`).
 */
export function createApp(
  deps: ApiDeps,
  log: Log,
  rootUrl: () => string = () => deps.config.publicUrl ?? `http://${deps.config.host}:${deps.config.port}`,
  pings = createPings(deps),
) {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', 'loopback');
  // A SERVER span per request, named after its route once matched (tracing on only).
  app.use((req, res, next) => inServerSpan(req, res, () => ({
    route: req.route ? `${req.baseUrl}${String(req.route.path)}` : undefined,
    ...((req as { orgId?: string }).orgId ? { attributes: { 'jetcron.org_id': (req as { orgId?: string }).orgId! } } : {}),
  }), next));

  app.use((req, res, next) => {
    const t0 = performance.now();
    res.on('finish', () => {
      const route = (req.route?.path as string | undefined) ?? 'unmatched';
      const labels = { method: req.method, route, status: res.statusCode };
      deps.metrics.httpRequests.inc(labels);
      deps.metrics.httpRequestDuration.observe(labels, (performance.now() - t0) / 1000);
    });
    next();
  });
  app.use(checkPath);
  // One debug line per request (LOG_LEVEL=debug only: otherwise not even registered).
  const debug = log.debug;
  if (debug) {
    app.use((req, res, next) => {
      const t0 = performance.now();
      res.once('finish', () => debug('request', () => ({
        method: req.method, route: req.route ? `${req.baseUrl}${String(req.route.path)}` : null, status: res.statusCode,
        org_id: (req as { orgId?: string }).orgId ?? null, id: req.params?.id ?? null, duration_ms: Math.round((performance.now() - t0) * 100) / 100,
      })));
      next();
    });
  }

  app.get('/healthz', deps.health.handler);
  // Liveness only (the process answers); /healthz says whether its work gets done.
  app.get('/livez', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/metrics', metricsHandler(deps.metrics));

  app.get('/api/v1/openapi.json', (_req, res) => void res.json(openApiDocument(`${rootUrl()}/api/v1`)));
  // The event catalogue (AsyncAPI 3.0), built once from the event schemas: docs/analysts.md.
  let catalogue: Record<string, unknown> | undefined;
  app.get('/asyncapi.json', (_req, res) => void res.json((catalogue ??= asyncApiDocument())));

  // The web console: its page at `/`, its files under `/console/` (console-files.ts).
  app.use(consoleRoutes());
  app.use(pingRoutes(deps, pings.pinger));

  const api = express.Router();
  // Key and rate limit first: a stranger's or an over-limit body is never parsed.
  api.use(authenticate(deps));
  api.use(rateLimit(deps));
  api.use(checkQuery);
  // Reads nothing from the read models: it must not wait for them as reads do.
  api.use(liveRoutes(deps));
  api.use(deps.reads.beforeReads);
  // The batch route parses its own, larger body; it sits before the general parser.
  api.use(batchRoutes(deps));
  api.use(jsonBody());
  api.use(laneCancelRoutes(deps));
  api.use(taskRoutes(deps));
  api.use(scheduleRoutes(deps));
  api.use(monitorRoutes(deps, rootUrl, pings.tokens));
  api.use(endpointRoutes(deps, rootUrl));
  api.use(flowControlRoutes(deps));
  api.use(channelRoutes(deps, rootUrl));
  api.use(syncRoutes(deps));
  api.use(jobRoutes(deps, rootUrl));
  api.use(executionRoutes(deps));
  api.use(organizationRoutes(deps));
  api.use(scriptRoutes(deps));
  api.use((_req, _res, next) => next(notFound('Not found')));
  app.use('/api/v1', api);

  app.use((_req, res) => void res.status(404).json({ error: { message: 'Not found', field: null } }));
  app.use(errorMiddleware(log));
  return app;
}
