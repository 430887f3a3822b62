import type { NextFunction, Request, Response } from 'express';
import { badRequest } from '../lib/errors.ts';

// No route, id, token or query value of ours holds a control character, and Postgres
// refuses NUL in text outright: refuse them where they come in, not at the query.
const CONTROL = /[\u0000-\u001f\u007f]/;

function decoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined; // a lone `%`, `%zz`, or escapes that are not UTF-8 (`%C0%AF`, `%ff`)
  }
}

/**
 * 400 for a path whose percent-encoding does not decode to UTF-8 text, or that
 * decodes to a control character (`/tasks/%00`). Before routing, so that no route
 * parameter ever holds either.
 */
export function checkPath(req: Request, _res: Response, next: NextFunction): void {
  const url = req.originalUrl;
  const q = url.indexOf('?');
  const path = decoded(q < 0 ? url : url.slice(0, q));
  if (path === undefined) return next(badRequest('The path has bad percent-encoding'));
  if (CONTROL.test(path)) return next(badRequest('The path must not contain control characters'));
  next();
}

/** 400 naming the parameter for a query value that does not decode or holds a control character. */
export function checkQuery(req: Request, _res: Response, next: NextFunction): void {
  const url = req.originalUrl;
  const q = url.indexOf('?');
  if (q < 0) return next();
  for (const pair of url.slice(q + 1).split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decoded((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' '));
    const value = eq < 0 ? '' : decoded(pair.slice(eq + 1).replace(/\+/g, ' '));
    if (name === undefined || CONTROL.test(name)) return next(badRequest('A query parameter name has bad percent-encoding or control characters'));
    if (value === undefined) return next(badRequest(`query parameter ${name} has bad percent-encoding`, name));
    if (CONTROL.test(value)) return next(badRequest(`query parameter ${name} must not contain control characters`, name));
  }
  next();
}
