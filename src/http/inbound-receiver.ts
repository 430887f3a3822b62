import { trace } from '@opentelemetry/api';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';
import { newId } from '../lib/ids.ts';
import { isoTime } from '../lib/iso-time.ts';
import { storableText } from '../lib/input-checks.ts';
import type { Log } from '../lib/logger.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { EventStore } from '../commands/store.ts';
import type { SecretBox } from '../nats/secret-box.ts';
import type { Nats } from '../nats/connection.ts';
import type { EndpointDirectory } from '../inbound/endpoint-directory.ts';
import { hookRequest, type HooksFor } from '../inbound/pipeline.ts';
import { presetVerifiers } from '../inbound/verification.ts';
import { createRequestGroups } from '../inbound/request-groups.ts';
import type { InboundRequestMeta } from '../inbound/stored-request.ts';
import type { ReadYourWrites } from './read-your-writes.ts';
import { inServerSpan } from '../telemetry/server-span.ts';
import { bindActive } from '../telemetry/tracing.ts';
import { sourceIp } from './source-ip.ts';

/** The contract: an inbound body over 1 MiB is refused with 413 and nothing is stored. */
export const MAX_INBOUND_BODY = 1024 * 1024;
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const PATH = /^\/in\/([^/?#]+)\/?(?:\?(.*))?$/s;

export interface InboundReceiverDeps {
  nats: Nats;
  endpoints: EndpointDirectory;
  hooks: HooksFor;
  /** Opens the endpoint's secrets for `verify`, the only hook that sees them. */
  secrets: SecretBox;
  metrics: Metrics;
  log: Log;
  /** Where the receiver records the requests no hook touches itself (their `InboundEventReceived` commit, no router hop: `request-groups.ts`). */
  store: EventStore;
  /** A 200 means a read of the organization that follows lists the event: the answer waits until every API process knows where it is. */
  reads: Pick<ReadYourWrites, 'wrote' | 'wroteInbound'>;
}

/**
 * Writes an answer and counts it. The headers go as a flat list and the metrics are
 * taken here, not on 'finish': the receiver answers at the rate of a bare server, and
 * a header object, a listener and a closure per request showed in its profile.
 */
function answer(res: ServerResponse, metrics: Metrics, t0: number, status: number, text: string, headers?: readonly string[]): void {
  const head = ['Content-Type', 'application/json; charset=utf-8', 'Content-Length', String(Buffer.byteLength(text))];
  res.writeHead(status, headers ? head.concat(headers) : head);
  res.end(text);
  metrics.inboundRequests.inc({ status });
  metrics.inboundRequestDuration.observe((performance.now() - t0) / 1000);
}

const nullableText = (text: string | null) => (text === null ? null : storableText(text));

/**
 * Reads the body, then calls `done` with it (or 'too_large' once it passes the limit, the
 * rest unread); `failed` on a stream error. Callbacks, not a promise: on the hot path a
 * request that needs nothing else is answered from the group's one promise.
 */
function readBody(req: IncomingMessage, done: (body: Buffer | 'too_large') => void, failed: (err: unknown) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  // Set once `done` ran: an error after it (a sender going away after its 413) changes nothing.
  let over = false;
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > MAX_INBOUND_BODY) {
      over = true;
      chunks.length = 0;
      done('too_large');
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (over) return;
    over = true;
    done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
  req.on('error', (err) => {
    if (!over) failed(err);
  });
}

/**
 * `{root}/in/<slug>`: the receive and verify stages of the inbound pipeline, outside
 * express because this is the hot path (no API key, no JSON parsing). The request
 * is answered only after JetStream has stored it in INBOUND (with the other requests
 * to its endpoint of the same loop turn, `request-groups.ts`) and its event is
 * recorded here (no hook touches it) or its position is known to the reads (the
 * router records it: a read waits for the router, `read-your-writes.ts`).
 */
export function createInboundReceiver(deps: InboundReceiverDeps) {
  const presets = presetVerifiers(deps.secrets);
  const groups = createRequestGroups({ nats: deps.nats, store: deps.store, log: deps.log });

  const error = (res: ServerResponse, t0: number, status: number, message: string, headers?: readonly string[]) =>
    answer(res, deps.metrics, t0, status, JSON.stringify({ error: { message, field: null } }), headers);

  /** Anything thrown past the answer's checks: a 500 (nothing was stored), or the connection dropped once answering began. */
  function failed(res: ServerResponse, t0: number, err: unknown): void {
    deps.log(`inbound: ${(err as Error).message}`);
    if (!res.headersSent) error(res, t0, 500, 'The request could not be stored; retry');
    else res.destroy();
  }

  /**
   * The common case (the endpoint known here, no preset or script) waits for nothing
   * but the body and the group's store: no await per stage.
   */
  function receive(req: IncomingMessage, res: ServerResponse, slug: string, query: string, t0: number): void {
    const method = req.method ?? 'GET';
    if (!METHODS.has(method)) return error(res, t0, 405, `method ${method} is not accepted; use GET, POST, PUT, PATCH or DELETE`, ['Allow', 'GET, POST, PUT, PATCH, DELETE']);
    const known = deps.endpoints.known(slug);
    if (known !== undefined) return withEndpoint(req, res, known, slug, query, method, t0);
    deps.endpoints.bySlug(slug).then((endpoint) => withEndpoint(req, res, endpoint, slug, query, method, t0)).catch((err) => failed(res, t0, err));
  }

  function withEndpoint(req: IncomingMessage, res: ServerResponse, endpoint: Endpoint | null, slug: string, query: string, method: string, t0: number): void {
    if (!endpoint) return error(res, t0, 404, 'Not found');
    const span = trace.getActiveSpan();
    if (span?.isRecording()) span.setAttributes({ 'jetcron.org_id': endpoint.org_id, 'jetcron.endpoint_id': endpoint.id });
    if (!endpoint.enabled) return error(res, t0, 503, 'Endpoint disabled', ['Retry-After', '60']);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_INBOUND_BODY) return tooLarge(res, t0);
    // Bound: the body's 'end' runs in the socket's context, and the request's span must stay the active one for its metadata's traceparent.
    readBody(req, bindActive((body: Buffer | 'too_large') => {
      try {
        if (body === 'too_large') return tooLarge(res, t0);
        received(req, res, endpoint, slug, query, method, body, t0);
      } catch (err) {
        failed(res, t0, err);
      }
    }), (err) => failed(res, t0, err));
  }

  function received(req: IncomingMessage, res: ServerResponse, endpoint: Endpoint, slug: string, query: string, method: string, body: Buffer, t0: number): void {
    const now = Date.now();
    const raw = req.rawHeaders;
    const pairs: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
    const meta: InboundRequestMeta = {
      id: newId('evt', now),
      org_id: endpoint.org_id,
      endpoint_id: endpoint.id,
      method,
      path: `/in/${slug}`,
      // These two reach the event log (the headers and body stay in INBOUND only). Node's
      // parser lets no NUL into a request line, but the forwarded address is any text.
      query: query && storableText(query),
      headers: pairs,
      source_ip: nullableText(sourceIp(req)),
      received_at: isoTime(now),
      body_size: body.length,
    };
    // The preset first, on the raw body: a request it refuses never reaches the script.
    const preset = presets(endpoint)?.(meta.headers, body, Date.now());
    if (preset && !preset.ok) meta.rejected = { status_code: 403, reason: preset.reason };
    const hooks = meta.rejected ? null : deps.hooks(endpoint);
    if (!hooks) return store(res, endpoint, meta, body, t0);
    verify(endpoint, hooks, meta, body).then((verified) => {
      // Not a verdict: nothing is stored and the sender is told to come back.
      if (!verified) return error(res, t0, 503, 'The endpoint script could not run now; retry', ['Retry-After', '1']);
      store(res, endpoint, meta, body, t0);
    }).catch((err) => failed(res, t0, err));
  }

  function store(res: ServerResponse, endpoint: Endpoint, meta: InboundRequestMeta, body: Buffer, t0: number): void {
    // An id is [a-z0-9_]: the answer needs no JSON encoder.
    const text = `{"id":"${meta.id}","status":"${meta.rejected ? 'rejected' : endpoint.paused ? 'queued' : 'received'}"}`;
    const status = meta.rejected?.status_code ?? 200;
    groups.store(SUBJECTS.inbound(endpoint.org_id, endpoint.id), { meta, body }, endpoint)
      .then((at) => (at.log === 'events' ? deps.reads.wrote(endpoint.org_id, at.seq) : deps.reads.wroteInbound(endpoint.org_id, at.seq)))
      .then(() => answer(res, deps.metrics, t0, status, text), (err) => failed(res, t0, err));
  }

  /**
   * The script's `verify(req, secrets)` (after the preset, which passed), before the
   * sender is answered: a refusal, an error or a limit hit marks the request rejected
   * (it is stored all the same), with the reason its event row shows.
   */
  async function verify(endpoint: Endpoint, hooks: NonNullable<ReturnType<HooksFor>>, meta: InboundRequestMeta, body: Buffer): Promise<boolean> {
    let secrets: Record<string, string>;
    try {
      secrets = deps.secrets.open(endpoint.sealed_secrets);
    } catch (err) {
      meta.rejected = { status_code: 403, reason: `verify: the endpoint's secrets could not be opened: ${(err as Error).message}` };
      return true;
    }
    const out = await hooks.verify(hookRequest(meta, body), secrets);
    if (!out.ok && out.unavailable) {
      deps.log(`inbound: ${out.error}; answered 503`);
      return false;
    }
    if (out.logs.length) meta.verify_logs = out.logs;
    if (!out.ok) meta.rejected = { status_code: 403, reason: out.error };
    else if (!out.value.accepted) meta.rejected = { status_code: out.value.status_code, reason: `verify returned false (answered ${out.value.status_code})` };
    return true;
  }

  function tooLarge(res: ServerResponse, t0: number): void {
    // The rest of an oversized body is not read: close the connection after answering.
    error(res, t0, 413, `request body exceeds ${MAX_INBOUND_BODY} bytes`, ['Connection', 'close']);
  }

  return {
    /** Handles the request when it is for an inbound URL; false = not ours, pass it on. */
    handle(req: IncomingMessage, res: ServerResponse): boolean {
      const url = req.url ?? '';
      if (!url.startsWith('/in/')) return false;
      const t0 = performance.now();
      const m = PATH.exec(url);
      if (!m) {
        error(res, t0, 404, 'Not found');
        return true;
      }
      const slug = m[1]!;
      inServerSpan(req, res, () => ({ route: '/in/{slug}' }), () => {
        try {
          receive(req, res, slug, m[2] ?? '', t0);
        } catch (err) {
          failed(res, t0, err);
        }
      });
      return true;
    },
  };
}
