import { STREAMS } from '../../streams/definitions.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import type { MessageHeaders } from '../nats/event-reader.ts';

/** An inbound request's metadata: the first line of its INBOUND message. */
export interface InboundRequestMeta {
  id: string;
  org_id: string;
  endpoint_id: string;
  method: string;
  /** As received, e.g. `/in/ep_…`. */
  path: string;
  /** Without the `?`; empty when none. */
  query: string;
  /** Raw name/value pairs in arrival order (names as sent, duplicates kept). */
  headers: [string, string][];
  source_ip: string | null;
  received_at: string;
  body_size: number;
  /** Set when `verify()` refused it: the event is stored anyway and forwards nothing; `reason` says why. */
  rejected?: { status_code: number; reason?: string } | undefined;
  /** What the endpoint script's `verify` logged. */
  verify_logs?: string[] | undefined;
  /** The receiver's W3C trace context, when tracing was on (a group's message has no header per request). */
  traceparent?: string | undefined;
}

export interface StoredRequest {
  meta: InboundRequestMeta;
  body: Buffer;
}

/** What the router reads of a request: its metadata but the request's own headers. */
export type RequestRoute = Omit<InboundRequestMeta, 'headers'>;

/**
 * The NATS header of a group's message holding its requests' routes, a JSON array: the
 * router's consumer delivers headers only (`headers_only`), so the bodies and the
 * requests' headers stay in nats-server unless a hook needs them.
 */
export const ROUTES_HEADER = 'Jetcron-Requests';
/**
 * The NATS header of a group the receiver recorded itself (requests no hook touches): the EVENTS subject of its `InboundEventReceived` commit. The router
 * passes such a message over; its payload is the whole group (`encodeWholeGroup`), as
 * it has no routes for the router.
 */
export const ROUTED_HEADER = 'Jetcron-Routed';
/** JetStream refuses a message whose headers pass 64 KiB: a group with longer routes is written whole in its payload. */
const MAX_ROUTES_HEADER = 62 * 1024;

const NEWLINE = 0x0a;
const OPEN_BRACKET = 0x5b;

/**
 * One INBOUND message of one request (every message before 2026-11-26, and still the
 * format a test can write): the metadata as one JSON line, a newline, then the body's
 * raw bytes. JSON text never holds a raw newline, so the first one ends the metadata,
 * and binary bodies need no encoding (no base64 growth on a 1 MiB body).
 */
export function encodeStoredRequest(meta: InboundRequestMeta, body: Buffer): Uint8Array {
  const head = Buffer.from(JSON.stringify(meta) + '\n');
  return Buffer.concat([head, body], head.length + body.length);
}

/** A JSON line, then the requests' bodies back to back. */
function lineAndBodies(line: unknown, requests: readonly StoredRequest[]): Buffer {
  const parts = [Buffer.from(JSON.stringify(line) + '\n'), ...requests.map((r) => r.body)];
  return Buffer.concat(parts, parts.reduce((n, b) => n + b.length, 0));
}

/**
 * One INBOUND message of several requests of one endpoint, in arrival order (from
 * 2026-11-26 11:00): their routes as a JSON array in the `Jetcron-Requests` header; the
 * payload the JSON array of each request's header pairs on the first line, then their
 * bodies back to back, each `body_size` bytes. A group whose routes would not fit a
 * header is written as before (no header: every request's whole metadata as a JSON
 * array on the first line, then the bodies; the `[` tells it from a single request's `{`).
 */
export function encodeStoredGroup(requests: readonly StoredRequest[]): { data: Uint8Array; headers?: Record<string, string> } {
  const routes = JSON.stringify(requests.map(({ meta: { headers: _, ...route } }) => route));
  if (Buffer.byteLength(routes) > MAX_ROUTES_HEADER) return { data: encodeWholeGroup(requests) };
  return { data: lineAndBodies(requests.map((r) => r.meta.headers), requests), headers: { [ROUTES_HEADER]: routes } };
}

/** A group in its payload alone (every group of 2026-11-26 before 11:00, and one whose routes are too long for a header). */
export function encodeWholeGroup(requests: readonly StoredRequest[]): Uint8Array {
  return lineAndBodies(requests.map((r) => r.meta), requests);
}

/** The routes a message's header holds; null for a message that carries them in its payload (written before, or too long). */
export function routesOf(headers: MessageHeaders | undefined): RequestRoute[] | null {
  const routes = headers?.get(ROUTES_HEADER);
  return routes ? (JSON.parse(routes) as RequestRoute[]) : null;
}

/** The requests one INBOUND message holds, in arrival order: a group's, or the one. */
export function decodeStoredRequests(data: Uint8Array, headers?: MessageHeaders): StoredRequest[] {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const cut = buf.indexOf(NEWLINE);
  if (cut < 0) throw new Error('stored inbound request has no metadata line');
  const head = buf.subarray(0, cut);
  const routes = routesOf(headers);
  if (!routes && head[0] !== OPEN_BRACKET) return [{ meta: decodeJson<InboundRequestMeta>(head), body: buf.subarray(cut + 1) }];
  const metas = routes
    ? decodeJson<Array<InboundRequestMeta['headers']>>(head).map((pairs, i): InboundRequestMeta => ({ ...routes[i]!, headers: pairs }))
    : decodeJson<InboundRequestMeta[]>(head);
  if (routes && metas.length !== routes.length) throw new Error(`stored inbound group: ${routes.length} routes, ${metas.length} header lists`);
  let at = cut + 1;
  const out = metas.map((meta) => {
    const body = buf.subarray(at, at + meta.body_size);
    at += meta.body_size;
    return { meta, body };
  });
  if (at !== buf.length) throw new Error(`stored inbound group: bodies of ${buf.length - cut - 1} bytes, metadata says ${at - cut - 1}`);
  return out;
}

/** The requests of the INBOUND message at sequence `seq` (one direct get), or null once it is gone. */
export async function loadStoredMessage(nats: Nats, seq: number): Promise<StoredRequest[] | null> {
  const msg = await nats.jsm.direct.getMessage(STREAMS.inbound.name, { seq });
  return msg ? decodeStoredRequests(msg.data, msg.header) : null;
}

/**
 * The request of inbound event `eventId` in the INBOUND message at sequence `seq` (one
 * direct get), or null once it is gone: past the 30-day history, or purged with its endpoint.
 */
export async function loadStoredRequest(nats: Nats, seq: number, eventId: string): Promise<StoredRequest | null> {
  return (await loadStoredMessage(nats, seq))?.find((r) => r.meta.id === eventId) ?? null;
}

/** Header names compared without case; the first spelling seen is kept. */
export function headerObject(pairs: [string, string][]): Record<string, string> {
  const out: Record<string, string> = {};
  const names = new Map<string, string>();
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    const known = names.get(lower);
    if (known === undefined) {
      names.set(lower, name);
      out[name] = value;
    } else {
      out[known] = `${out[known]}, ${value}`;
    }
  }
  return out;
}
