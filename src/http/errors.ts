import { STATUS_CODES } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../lib/errors.ts';
import { describeError, isTransient } from '../lib/transient.ts';

/** An error as the contract answers it: status, headers and `{error: {message, field}}`. */
export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: { error: { message: string; field: string | null } };
}

const answer = (status: number, message: string, field: string | null = null, headers: Record<string, string> = {}): ErrorAnswer =>
  ({ status, headers, body: { error: { message, field } } });

/** Turns every error into the contract's answer; a 5xx body reveals nothing. */
export function errorAnswer(err: unknown, log: (m: string) => void): ErrorAnswer {
  if (err instanceof ApiError) return answer(err.status, err.message, err.field, err.headers);
  // express and its parsers mark a client's fault with a 4xx `status` (the router's
  // URIError for a path parameter that does not decode, for one): that is the answer.
  const e = err as { status?: unknown; statusCode?: unknown; expose?: boolean; message?: string } | null;
  const status = Number(e?.status ?? e?.statusCode);
  if (Number.isInteger(status) && status >= 400 && status < 500) {
    return answer(status, err instanceof URIError ? 'The path has bad percent-encoding' : e?.expose && e.message ? e.message : STATUS_CODES[status] ?? 'Bad request');
  }
  // The log or the database cannot answer right now (an election, a restart): say when
  // to try again. Whether a write landed may be unknown (a publish that timed out); a
  // retry with the same Idempotency-Key finds out instead of writing twice.
  if (isTransient(err)) {
    log(`http: ${describeError(err)}; answered 503`);
    return answer(503, 'Service temporarily unavailable; retry shortly', null, { 'Retry-After': '1' });
  }
  log(`http: ${(err as Error)?.stack ?? String(err)}`);
  return answer(500, 'Internal server error');
}

/** The express end of {@link errorAnswer}. */
export function errorMiddleware(log: (m: string) => void) {
  return (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    // The answer has begun: all that is left is to end the connection (express does).
    if (res.headersSent) return next(err);
    const { status, headers, body } = errorAnswer(err, log);
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.status(status).json(body);
  };
}
