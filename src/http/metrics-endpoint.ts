import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Metrics } from '../lib/metrics.ts';

/** `GET /metrics`: the process's registry in Prometheus text format. */
export function metricsHandler(metrics: Metrics) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    metrics.render().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': metrics.contentType });
        res.end(text);
      },
      (err: Error) => {
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(`metrics could not be collected: ${err.message}\n`);
      },
    );
  };
}

/**
 * A listener for `/metrics` alone (JETCRON_METRICS_PORT), so a process without the API
 * (a dispatcher, a scheduler) can be scraped too. Resolves with its URL once it listens.
 */
export async function startMetricsServer(opts: { metrics: Metrics; host: string; port: number }) {
  const handle = metricsHandler(opts.metrics);
  const server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) return handle(req, res);
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('Not found: this port serves GET /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    url: `http://${opts.host}:${port}/metrics`,
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}
