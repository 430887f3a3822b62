/**
 * `Idempotency-Key` for any write route: `r.post('/tasks', idempotent(deps), handler(…))`.
 *
 * Records live in the JetStream KV bucket `idempotency` (24 h TTL, shared by every API
 * process), one per organization and key: `<org_id>.<sha256 hex of the key>`.
 *
 * - The first request creates the record `in_flight` with `kv.create`: create-if-absent
 *   is the lock, so of any number of concurrent requests (in any process) one proceeds.
 * - A 2xx answer is stored (`done`: status, selected headers, body) *before* it is sent,
 *   so a retry that follows the answer replays it. A 4xx deletes the record first, so a
 *   retry does the work normally; a 5xx marks it `unsettled` (its write may have landed),
 *   and the next request takes it over at once with the first `started_at`.
 * - A retry meanwhile: 409 while in flight; the stored answer with
 *   `Idempotent-Replayed: true` once done; 422 when the key came with a different
 *   request (method, path or raw body).
 * - An `in_flight` record older than {@link STALE_AFTER_MS} belongs to a process that
 *   died mid-request; the next request takes it over (update on its revision), keeping
 *   the record's `started_at`. Whether the dead request's command reached the log is
 *   not guessed: routes derive the new resource's id from the key and that first
 *   `started_at` ({@link onceId}), so a command appended before the crash makes the
 *   re-run's append fail as a conflict, and the route answers with what is stored.
 *   A second resource for one key cannot be created, whatever the KV record says.
 *
 * The answer is captured at `res.end`, which `res.json`, `res.send` and `res.end` all
 * reach with the whole body; routes behind this middleware must not stream (`res.write`).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NatsConnection } from '@nats-io/transport-node';
import { Kvm, type KV } from '@nats-io/kv';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import { badRequest, conflict, unprocessable } from '../lib/errors.ts';
import { derivedId, type IdPrefix } from '../lib/ids.ts';
import { isWrongLastSequence } from '../nats/jetstream-errors.ts';
import type { ApiDeps, AuthedRequest } from './context.ts';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
/**
 * An in-flight record this old is taken over. No request runs this long (the conflict
 * budget, the read-your-writes wait and a publish timeout add up to ~20 s), and a
 * takeover of one that still runs cannot create twice (see {@link onceId}).
 */
export const STALE_AFTER_MS = 30_000;
const PERSIST_FOR_MS = 8_000;
/** Response headers replayed besides the status and body. */
const KEPT_HEADERS = ['content-type', 'location'];
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** The header as an OpenAPI parameter, from the same pattern the middleware checks. */
export const idempotencyKeyParameter = {
  name: IDEMPOTENCY_HEADER,
  in: 'header',
  required: false,
  description: 'Makes the request safe to retry for 24 h: a repeat with the same key and the same request replays the first 2xx answer '
    + '(with `Idempotent-Replayed: true`) instead of doing the work again; 409 while the first is in progress, 422 when the key '
    + 'was used with a different request. Keys are per organization.',
  schema: { type: 'string', pattern: KEY_PATTERN.source },
} as const;

interface InFlight {
  state: 'in_flight';
  fingerprint: string;
  started_at: string;
  /** Answered 5xx: its outcome may be unknown, so the next request takes over at once, keeping `started_at`. */
  unsettled?: boolean;
}
interface Done {
  state: 'done';
  fingerprint: string;
  status: number;
  headers: Record<string, string>;
  completed_at: string;
}
type Meta = InFlight | Done;
export interface IdempotencyRecord {
  meta: Meta;
  body: Buffer;
}

const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');

// ---- raw body, for the fingerprint -------------------------------------------------

const rawBodies = new WeakMap<IncomingMessage, Buffer>();

/** Called by the body parser (`request-body.ts`): keeps the raw bytes the fingerprint hashes. */
export function keepRawBody(req: IncomingMessage, buf: Buffer): void {
  rawBodies.set(req, buf);
}

// ---- record encoding ---------------------------------------------------------------
// One JSON line of metadata, then the response body's bytes as they were sent: the
// body is not escaped a second time inside the JSON (a 256 KB task body stays ~256 KB).

export function encodeRecord(meta: Meta, body: Uint8Array = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.from(`${JSON.stringify(meta)}\n`), body]);
}

export function decodeRecord(value: Uint8Array): IdempotencyRecord | null {
  const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const nl = buf.indexOf(0x0a);
  try {
    const meta = JSON.parse(buf.subarray(0, nl < 0 ? buf.length : nl).toString('utf8')) as Meta;
    if (meta?.state !== 'in_flight' && meta?.state !== 'done') return null;
    return { meta, body: nl < 0 ? Buffer.alloc(0) : Buffer.from(buf.subarray(nl + 1)) };
  } catch {
    return null;
  }
}

/** The KV key of an organization's `Idempotency-Key` (KV keys allow only `[-/_=.a-zA-Z0-9]`). */
export const idempotencyKvKey = (orgId: string, key: string) => `${orgId}.${sha256(key)}`;

/** The same key may only be reused with the same method, path and raw body. */
export const requestFingerprint = (method: string, path: string, rawBody: Uint8Array) =>
  sha256(`${method.toUpperCase()} ${path}\n${sha256(rawBody)}`);

// ---- bucket ------------------------------------------------------------------------

const buckets = new WeakMap<NatsConnection, Promise<KV>>();

function bucket(nc: NatsConnection): Promise<KV> {
  let kv = buckets.get(nc);
  if (!kv) {
    kv = new Kvm(nc).open(KV_BUCKETS.idempotency.name);
    kv.catch(() => buckets.delete(nc));
    buckets.set(nc, kv);
  }
  return kv;
}

// ---- middleware --------------------------------------------------------------------

type Claim = { kind: 'claimed'; revision: number; startedAt: string } | { kind: 'replay'; record: IdempotencyRecord & { meta: Done } };

/**
 * Takes the key for this request, or says why not. Loops because the record can
 * change between a failed `create` and the read that explains it (deleted, taken over).
 */
async function claim(kv: KV, kvKey: string, fingerprint: string, now: () => number): Promise<Claim> {
  const inFlight = (startedAt: string) => encodeRecord({ state: 'in_flight', fingerprint, started_at: startedAt });
  let lastError: unknown;
  for (let i = 0; i < 5; i++) {
    const startedAt = new Date(now()).toISOString();
    try {
      return { kind: 'claimed', revision: await kv.create(kvKey, inFlight(startedAt)), startedAt };
    } catch (err) {
      lastError = err; // usually "wrong last sequence": the key exists
    }
    const entry = await kv.get(kvKey);
    if (!entry || entry.operation !== 'PUT') continue; // released meanwhile: create again
    const record = decodeRecord(entry.value);
    const stale = !record || (record.meta.state === 'in_flight' && (record.meta.unsettled === true || now() - Date.parse(record.meta.started_at) > STALE_AFTER_MS));
    if (stale) {
      // The first request's start stays: the ids it derived are the ones this one derives.
      const first = record?.meta.state === 'in_flight' && record.meta.fingerprint === fingerprint ? record.meta.started_at : startedAt;
      try {
        return { kind: 'claimed', revision: await kv.update(kvKey, inFlight(first), entry.revision), startedAt: first };
      } catch (err) {
        lastError = err; // another request took it over first
        continue;
      }
    }
    if (record.meta.fingerprint !== fingerprint) throw unprocessable('Idempotency-Key was used with a different request', IDEMPOTENCY_HEADER);
    if (record.meta.state === 'in_flight') throw conflict('Request in progress');
    return { kind: 'replay', record: record as IdempotencyRecord & { meta: Done } };
  }
  throw lastError instanceof Error ? lastError : new Error('idempotency: could not claim the key');
}

function replay(res: Response, record: IdempotencyRecord & { meta: Done }): void {
  for (const [name, value] of Object.entries(record.meta.headers)) res.setHeader(name, value);
  res.setHeader(REPLAYED_HEADER, 'true');
  res.setHeader('Content-Length', String(record.body.length));
  res.status(record.meta.status).end(record.body);
}

const onces = new WeakMap<Response, { seed: string; atMs: number }>();

/**
 * The id a create guarded by `Idempotency-Key` gives its new resource: the same for
 * every request with that key (and its first start), so a re-run after a crash finds
 * the resource its first run stored. Undefined without the header: a fresh id is made.
 */
export function onceId(res: Response, prefix: IdPrefix): string | undefined {
  const once = onces.get(res);
  return once && derivedId(prefix, once.atMs, once.seed, 0);
}

type EndArgs = [chunk?: unknown, encoding?: unknown, cb?: unknown];

/**
 * Defers `res.end` until `settle` has run on the status and body. `settle` never
 * rejects the response: whatever happens to the record, the client gets its answer.
 */
function beforeEnd(res: Response, settle: (status: number, body: Buffer) => Promise<void>): void {
  const end = res.end.bind(res) as (...args: EndArgs) => Response;
  let done = false;
  (res as unknown as { end: (...args: EndArgs) => Response }).end = (...args: EndArgs) => {
    if (done) return end(...args);
    done = true;
    const [chunk, encoding] = args;
    let body = Buffer.alloc(0);
    if (typeof chunk === 'string') body = Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    else if (chunk instanceof Uint8Array) body = Buffer.from(chunk);
    settle(res.statusCode, body).catch(() => {}).then(() => end(...args));
    return res;
  };
}

/**
 * Express middleware honouring `Idempotency-Key` on the route it guards. Must run
 * after authentication (it needs the organization) and after the body parser
 * (`jsonBody`, which calls {@link keepRawBody}).
 */
export function idempotent(deps: Pick<ApiDeps, 'nats' | 'metrics'>): RequestHandler {
  const now = () => Date.now(); // wall clock: staleness is about real processes, not scaled waits
  const failed = (what: string) => deps.metrics.idempotencyStoreFailures.inc({ what });
  // The bucket's leader may be changing: a record left in flight would answer 409 until it
  // goes stale, so its update is tried for a while (the answer waits) before giving up.
  const persist = async (write: () => Promise<unknown>, what: string) => {
    const until = Date.now() + PERSIST_FOR_MS;
    for (let wait = 100; ; wait = Math.min(wait * 2, 1000)) {
      try {
        await write();
        return;
      } catch (err) {
        // Lost to a takeover (its record stands), or out of time.
        if (isWrongLastSequence(err) || Date.now() + wait > until) {
          failed(what);
          return;
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  };

  const run = async (req: Request, res: Response, next: NextFunction) => {
    const header = req.headers['idempotency-key'];
    if (header === undefined) return next();
    if (typeof header !== 'string' || !KEY_PATTERN.test(header)) {
      throw badRequest(`${IDEMPOTENCY_HEADER} must be 1 to 255 visible ASCII characters`, IDEMPOTENCY_HEADER);
    }
    const orgId = (req as AuthedRequest).orgId;
    if (!orgId) throw new Error('idempotent() must run after authenticate()');
    const kv = await bucket(deps.nats.nc);
    const kvKey = idempotencyKvKey(orgId, header);
    const fingerprint = requestFingerprint(req.method, req.originalUrl, rawBodies.get(req) ?? Buffer.alloc(0));

    const claimed = await claim(kv, kvKey, fingerprint, now);
    if (claimed.kind === 'replay') {
      deps.metrics.idempotentReplays.inc();
      return replay(res, claimed.record);
    }

    onces.set(res, { seed: kvKey, atMs: Date.parse(claimed.startedAt) });
    beforeEnd(res, async (status, body) => {
      if (status >= 200 && status < 300) {
        const headers: Record<string, string> = {};
        for (const name of KEPT_HEADERS) {
          const v = res.getHeader(name);
          if (v !== undefined) headers[name] = String(v);
        }
        const meta: Done = { state: 'done', fingerprint, status, headers, completed_at: new Date(now()).toISOString() };
        // Update on our revision: if a takeover happened, the newer owner's record stands.
        await persist(() => kv.update(kvKey, encodeRecord(meta, body), claimed.revision), 'done');
      } else if (status >= 500) {
        // A 503 during an election may follow a write that landed: keep the first start,
        // so the retry derives the same ids and finds it (see onceId).
        const meta: InFlight = { state: 'in_flight', fingerprint, started_at: claimed.startedAt, unsettled: true };
        await persist(() => kv.update(kvKey, encodeRecord(meta), claimed.revision), 'release');
      } else {
        await persist(() => kv.delete(kvKey, { previousSeq: claimed.revision }), 'release');
      }
    });
    next();
  };

  return (req, res, next) => {
    run(req, res, next).catch(next);
  };
}
