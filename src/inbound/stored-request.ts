import { STREAMS } from '../../streams/definitions.ts';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';

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
}

export interface StoredRequest {
  meta: InboundRequestMeta;
  body: Buffer;
}

const NEWLINE = 0x0a;

/**
 * One INBOUND message: the metadata as one JSON line, a newline, then the body's raw
 * bytes. JSON text never holds a raw newline, so the first one ends the metadata,
 * and binary bodies need no encoding (no base64 growth on a 1 MiB body).
 */
export function encodeStoredRequest(meta: InboundRequestMeta, body: Buffer): Uint8Array {
  const head = Buffer.from(JSON.stringify(meta) + '\n');
  return Buffer.concat([head, body], head.length + body.length);
}

export function decodeStoredRequest(data: Uint8Array): StoredRequest {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const cut = buf.indexOf(NEWLINE);
  if (cut < 0) throw new Error('stored inbound request has no metadata line');
  return { meta: decodeJson<InboundRequestMeta>(buf.subarray(0, cut)), body: buf.subarray(cut + 1) };
}

/**
 * The request of inbound event `eventId` at INBOUND sequence `seq` (one direct get),
 * or null once it is gone: past the 30-day history, or purged with its endpoint.
 */
export async function loadStoredRequest(nats: Nats, seq: number, eventId: string): Promise<StoredRequest | null> {
  const msg = await nats.jsm.direct.getMessage(STREAMS.inbound.name, { seq });
  if (!msg) return null;
  const stored = decodeStoredRequest(msg.data);
  return stored.meta.id === eventId ? stored : null;
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
