import { STATUS_CODES } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../lib/errors.ts';
import { describeError, isTransient } from '../lib/transient.ts';

const send = (res: Response, status: number, message: string, field: string | null = null) =>
  void res.status(status).json({ error: { message, field } });

/** Turns every error into the contract's body; a 5xx body reveals nothing. */
export function errorMiddleware(log: (m: string) => void) {
  return (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    // The answer has begun: all that is left is to end the connection (express does).
    if (res.headersSent) return next(err);
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
      return send(res, err.status, err.message, err.field);
    }
    // express and its parsers mark a client's fault with a 4xx `status` (the router's
    // URIError for a path parameter that does not decode, for one): that is the answer.
    const e = err as { status?: unknown; statusCode?: unknown; expose?: boolean; message?: string } | null;
    const status = Number(e?.status ?? e?.statusCode);
    if (Number.isInteger(status) && status >= 400 && status < 500) {
      const message = err instanceof URIError ? 'The path has bad percent-encoding' : e?.expose && e.message ? e.message : STATUS_CODES[status] ?? 'Bad request';
      return send(res, status, message);
    }
    // The log or the database cannot answer right now (an election, a restart): say when
    // to try again. Whether a write landed may be unknown (a publish that timed out); a
    // retry with the same Idempotency-Key finds out instead of writing twice.
    if (isTransient(err)) {
      log(`http: ${describeError(err)}; answered 503`);
      res.setHeader('Retry-After', '1');
      return send(res, 503, 'Service temporarily unavailable; retry shortly');
    }
    log(`http: ${(err as Error)?.stack ?? String(err)}`);
    send(res, 500, 'Internal server error');
  };
}
