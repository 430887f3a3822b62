import { forwardRequest, type ForwardRequest } from '../inbound/pipeline.ts';
import { loadStoredRequest } from '../inbound/stored-request.ts';
import type { Nats } from '../nats/connection.ts';
import type { InboundRef } from '../commands/execution/job.ts';
import { storableAsText } from './stored-body.ts';

/**
 * The request an endpoint execution forwards: the stored inbound request (one direct
 * get from INBOUND) with the plan's replacements. null when it is gone: past the
 * 30-day history, or purged with its endpoint.
 */
export async function loadForwardRequest(nats: Nats, ref: InboundRef): Promise<ForwardRequest | null> {
  const stored = await loadStoredRequest(nats, ref.seq, ref.event_id);
  return stored && forwardRequest(stored, ref);
}

const RECORDED_BODY_BYTES = 256 * 1024;

/** How a sent body goes into the attempt's record: text when it is UTF-8, else base64; at most 256 KB. */
export function recordedBody(body: string | Buffer | null): { body: string | null; body_encoding?: 'base64'; body_truncated?: boolean } {
  if (body === null) return { body: null };
  if (typeof body === 'string') {
    if (Buffer.byteLength(body) <= RECORDED_BODY_BYTES && !body.includes('\0')) return { body };
    body = Buffer.from(body, 'utf8');
  }
  const truncated = body.length > RECORDED_BODY_BYTES;
  const kept = truncated ? body.subarray(0, RECORDED_BODY_BYTES) : body;
  const text = kept.toString('utf8');
  // A cut may split a multi-byte character: judge the whole body, not the cut.
  const utf8 = storableAsText(body);
  const out = utf8 ? { body: text } : { body: kept.toString('base64'), body_encoding: 'base64' as const };
  return truncated ? { ...out, body_truncated: true } : out;
}
