import type { IncomingHttpHeaders } from 'node:http';
import type { Request } from 'express';
import { badRequest, unprocessable } from '../lib/errors.ts';

/** The parsed JSON object of a request; 400 when it is not JSON or not an object. */
export function jsonObject(req: Request, optional = false): Record<string, unknown> {
  return objectBody(req.headers, () => !!req.is('application/json'), req.body, optional);
}

/** {@link jsonObject} from its parts: the request's headers, whether its type is JSON, its parsed body. */
export function objectBody(headers: IncomingHttpHeaders, isJson: () => boolean, body: unknown, optional = false): Record<string, unknown> {
  const length = Number(headers['content-length'] ?? 0);
  const hasBody = length > 0 || headers['transfer-encoding'] !== undefined;
  if (!hasBody) {
    if (optional) return {};
    throw badRequest('Request body is required (a JSON object)');
  }
  if (!isJson()) throw badRequest('Content-Type must be application/json');
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Request body must be a JSON object');
  return body as Record<string, unknown>;
}

export function queryInt(req: Request, name: string, fallback: number): number {
  const raw = req.query[name];
  if (raw === undefined) return fallback;
  if (typeof raw !== 'string' || !/^-?\d+$/.test(raw)) throw badRequest(`${name} must be an integer`, name);
  const n = Number(raw);
  // Past 2^53 a number is no longer exact, and Postgres would refuse it as text ("1e+20").
  if (!Number.isSafeInteger(n)) throw unprocessable(`${name} is out of range`, name);
  return n;
}

export function queryString(req: Request, name: string): string | undefined {
  const raw = req.query[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string') throw badRequest(`${name} must be a single string`, name);
  return raw;
}
