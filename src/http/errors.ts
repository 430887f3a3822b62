import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../lib/errors.ts';

/** Turns every error into the contract's body; a 5xx body reveals nothing. */
export function errorMiddleware(log: (m: string) => void) {
  return (err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
      res.status(err.status).json({ error: { message: err.message, field: err.field } });
      return;
    }
    const e = err as { type?: string; status?: number; message?: string };
    if (e?.type === 'entity.too.large') {
      res.status(413).json({ error: { message: 'Request body too large', field: null } });
      return;
    }
    if (e?.type === 'entity.parse.failed') {
      res.status(400).json({ error: { message: 'Request body is not valid JSON', field: null } });
      return;
    }
    log(`http: ${(err as Error)?.stack ?? String(err)}`);
    res.status(500).json({ error: { message: 'Internal server error', field: null } });
  };
}
