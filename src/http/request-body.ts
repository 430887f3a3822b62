/**
 * The API's one way in for request bodies (in place of express.json/express.raw), so
 * that every route refuses the same things with the same codes:
 *
 * - `Content-Encoding`: none, `identity`, `gzip` or `deflate`, one coding only; else 415.
 * - size: at most `limit` bytes as sent and as decoded (inflation stops at the limit,
 *   so a small zip bomb costs no more than a large plain body); else 413.
 * - a compressed body that does not inflate: 400.
 * - JSON only: a `charset` other than UTF-8 is 415; bytes that are not UTF-8 are 400;
 *   nesting deeper than {@link MAX_JSON_DEPTH} is 422; text that is not JSON is 400;
 *   NUL or an unpaired surrogate in any key or string is 422 naming the field.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ApiError, badRequest, unprocessable } from '../lib/errors.ts';
import { unstorableField } from '../lib/input-checks.ts';
import { nestingPastDepth } from '../lib/json.ts';
import { keepRawBody } from './idempotency.ts';

/** 1 MiB leaves room for a 256 KB task body plus the other fields; the body rule itself is checked per field. */
export const API_BODY_LIMIT = 1024 * 1024;
/** Objects and arrays inside objects and arrays, the request object itself being level 1: deep enough for any real payload. */
export const MAX_JSON_DEPTH = 64;

const unsupported = (message: string) => new ApiError(415, message);
const tooLarge = (limit: number) =>
  // The rest of an oversized body is not read: the connection cannot carry another request.
  new ApiError(413, `Request body too large (the limit is ${limit} bytes)`, null, { Connection: 'close' });

const inflaters = {
  gzip: promisify(zlib.gunzip),
  zlib: promisify(zlib.inflate),
  raw: promisify(zlib.inflateRaw),
};

/** Whether the request carries a body at all (as body-parser decides: a length or chunked framing). */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

function coding(req: IncomingMessage): 'identity' | 'gzip' | 'deflate' {
  const header = (req.headers['content-encoding'] ?? '').trim().toLowerCase();
  if (header === '' || header === 'identity') return 'identity';
  if (header === 'gzip' || header === 'x-gzip') return 'gzip';
  if (header === 'deflate') return 'deflate';
  throw unsupported(header.includes(',')
    ? 'Content-Encoding must be a single coding (identity, gzip or deflate)'
    : `Content-Encoding ${JSON.stringify(header)} is not supported; send identity, gzip or deflate`);
}

/** The `charset` parameter of Content-Type, lower-cased and unquoted; undefined when absent. */
function charset(req: IncomingMessage): string | undefined {
  for (const param of (req.headers['content-type'] ?? '').split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
  }
  return undefined;
}

/** The body's bytes as sent, at most `limit` (else a 413 that closes the connection); no decoding. */
export function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      cleanup();
      req.pause();
      reject(tooLarge(limit));
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(badRequest('The request body was not received in full'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}

async function inflate(raw: Buffer, how: 'gzip' | 'deflate', limit: number): Promise<Buffer> {
  // "deflate" is meant to be zlib-wrapped, but some clients send a raw deflate stream;
  // the zlib header (CM 8, check bits) tells the two apart.
  const zlibWrapped = raw.length >= 2 && (raw[0]! & 0x0f) === 8 && ((raw[0]! << 8) | raw[1]!) % 31 === 0;
  const run = how === 'gzip' ? inflaters.gzip : zlibWrapped ? inflaters.zlib : inflaters.raw;
  try {
    return await run(raw, { maxOutputLength: limit });
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit);
    throw badRequest(`Request body is not valid ${how} data`);
  }
}

/** The body's bytes as sent once decoded (Content-Encoding undone), at most `limit`. */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const how = coding(req);
  const raw = await readRaw(req, limit);
  return how === 'identity' || raw.length === 0 ? raw : inflate(raw, how, limit);
}

/** Decoded bytes → the JSON value, refusing what the store or the validators cannot take. */
function parseJson(bytes: Buffer): unknown {
  if (bytes.length === 0) return {};
  if (!isUtf8(bytes)) throw badRequest('Request body is not valid UTF-8');
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a UTF-8 byte order mark
  const deep = nestingPastDepth(text, MAX_JSON_DEPTH);
  if (deep) throw unprocessable(`${deep.field ?? 'body'} is nested deeper than ${MAX_JSON_DEPTH} levels`, deep.field);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest('Request body is not valid JSON');
  }
  const bad = unstorableField(value);
  if (bad) throw unprocessable(bad.message, bad.field);
  return value;
}

/**
 * A JSON request body as the API parses it: UTF-8 only (415 for another charset),
 * Content-Encoding undone, at most `limit` bytes (413), {} when there is none.
 * `raw`: the bytes as sent (after Content-Encoding), for the Idempotency-Key fingerprint.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<{ value: unknown; raw: Buffer }> {
  if (!hasBody(req)) return { value: parseJson(Buffer.alloc(0)), raw: Buffer.alloc(0) };
  const cs = charset(req);
  if (cs !== undefined && cs !== 'utf-8' && cs !== 'utf8') throw unsupported(`charset ${JSON.stringify(cs)} is not supported; JSON must be UTF-8`);
  const raw = await readBody(req, limit);
  return { value: parseJson(raw), raw };
}

// One parse per request: the batch route's parser runs first and the general one then passes.
const parsed = new WeakSet<IncomingMessage>();

function bodyMiddleware(limit: number, json: boolean): RequestHandler {
  const decode = json ? parseJson : (bytes: Buffer) => bytes;
  return (req: Request, _res: Response, next: NextFunction) => {
    if (parsed.has(req)) return next();
    parsed.add(req);
    if (!hasBody(req)) {
      req.body = decode(Buffer.alloc(0));
      return next();
    }
    const run = async () => {
      const { value, raw } = json ? await readJsonBody(req, limit) : { value: undefined, raw: await readBody(req, limit) };
      // The Idempotency-Key fingerprint hashes the body as sent (after Content-Encoding).
      keepRawBody(req, raw);
      req.body = json ? value : raw;
    };
    run().then(() => next(), next);
  };
}

/** Parses a JSON body of at most `limit` bytes into `req.body` ({} when there is none). */
export const jsonBody = (limit = API_BODY_LIMIT): RequestHandler => bodyMiddleware(limit, true);

/** Reads a body of at most `limit` bytes into `req.body` as a Buffer (empty when there is none). */
export const rawBody = (limit = API_BODY_LIMIT): RequestHandler => bodyMiddleware(limit, false);
