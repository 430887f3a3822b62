import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { OutboundClient, OutboundRequest } from './outbound-client.ts';
import type { OutboundResult } from '../commands/execution/exchange.ts';
import { currentTraceparent, inSpan } from '../telemetry/tracing.ts';

/**
 * An outbound request as a CLIENT span (HTTP semantic conventions), with the span's
 * `traceparent` sent along, so the receiver's own tracing joins the trace. With
 * tracing off this is the plain send: no span, no header.
 */
export function tracedSend(outbound: Pick<OutboundClient, 'send'>, req: OutboundRequest, shownUrl?: string): Promise<OutboundResult> {
  return inSpan(req.method, { kind: SpanKind.CLIENT }, async (span) => {
    if (!span.isRecording()) return outbound.send(req);
    let port = '';
    let host = '';
    try {
      const u = new URL(req.url);
      host = u.hostname;
      port = u.port || (u.protocol === 'https:' ? '443' : '80');
    } catch {
      /* an invalid URL: the send reports it */
    }
    span.setAttributes({ 'http.request.method': req.method, 'url.full': redactUrl(shownUrl ?? req.url), 'server.address': host, ...(port ? { 'server.port': Number(port) } : {}) });
    const traceparent = currentTraceparent();
    const result = await outbound.send(traceparent ? { ...req, headers: { ...req.headers, traceparent } } : req);
    if (result.kind === 'response') {
      span.setAttribute('http.response.status_code', result.statusCode);
      if (result.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
    } else {
      span.setAttribute('error.type', result.error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: result.message });
    }
    return result;
  });
}

/** A URL's user and password never go into a span. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = 'REDACTED';
      u.password = '';
    }
    return u.toString();
  } catch {
    return url;
  }
}
