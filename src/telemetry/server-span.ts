import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, trace, type Span, type TextMapGetter } from '@opentelemetry/api';
import { SpanKind, SpanStatusCode, tracingOn } from './tracing.ts';

const headerGetter: TextMapGetter<IncomingMessage['headers']> = {
  get: (headers, key) => headers[key],
  keys: (headers) => Object.keys(headers),
};

/**
 * An incoming HTTP request as a SERVER span (HTTP semantic conventions), continuing
 * the caller's trace when it sent `traceparent`. `run` goes on inside the span's
 * context, so what it appends or publishes carries the trace; the span ends when the
 * answer is written, named after the route `nameOf` gives then. Tracing off: `run()`.
 */
export function inServerSpan(
  req: IncomingMessage,
  res: ServerResponse,
  nameOf: () => { route: string | undefined; attributes?: Record<string, string> },
  run: () => void,
): void {
  if (!tracingOn()) return run();
  const method = req.method ?? 'GET';
  const parent = propagation.extract(ROOT_CONTEXT, req.headers, headerGetter);
  const path = (req.url ?? '/').split('?')[0]!;
  const span: Span = trace.getTracer('jetcron').startSpan(method, {
    kind: SpanKind.SERVER,
    attributes: {
      'http.request.method': method,
      // The path only: a query string may hold what should not leave the process.
      'url.path': path,
      'url.scheme': 'http',
      ...(req.headers['user-agent'] ? { 'user_agent.original': String(req.headers['user-agent']) } : {}),
    },
  }, parent);
  res.once('finish', () => {
    const { route, attributes } = nameOf();
    if (route) {
      span.updateName(`${method} ${route}`);
      span.setAttribute('http.route', route);
    }
    if (attributes) span.setAttributes(attributes);
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  });
  context.with(trace.setSpan(parent, span), run);
}
