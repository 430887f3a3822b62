import type { NextFunction, Request, Response } from 'express';
import { parseApiKey, secretMatches } from '../commands/api-key/secret.ts';
import type { ApiKey } from '../commands/api-key/types.ts';
import { ApiError } from '../lib/errors.ts';
import type { ApiDeps, AuthedRequest } from './context.ts';

const invalid = () => new ApiError(401, 'Invalid API key');

// Secrets already checked against a key record: hashing once per record, not per request.
// A revoked key arrives as a new record object, so it is checked (and refused) afresh.
const verified = new WeakMap<ApiKey, string>();

function matches(key: ApiKey, secret: string): boolean {
  if (verified.get(key) === secret) return true;
  if (!secretMatches(secret, key.secret_hash)) return false;
  verified.set(key, secret);
  return true;
}

/** Only the full `pk_….sk_…` key authenticates; the public part alone does not. */
export function authenticate(deps: ApiDeps) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const header = req.headers.authorization ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    const parsed = m ? parseApiKey(m[1]!) : null;
    if (!parsed) return next(new ApiError(401, header ? 'Invalid API key' : 'Missing API key: send Authorization: Bearer <API_KEY>'));
    deps.directory.apiKey(parsed.publicId).then((key) => {
      if (!key || key.revoked_at || !matches(key, parsed.secret)) return next(invalid());
      (req as AuthedRequest).orgId = key.org_id;
      (req as AuthedRequest).keyId = key.public_id;
      next();
    }, next);
  };
}

export function rateLimit(deps: ApiDeps) {
  return (req: Request, res: Response, next: NextFunction) => {
    const orgId = (req as AuthedRequest).orgId;
    deps.directory.organization(orgId).then((org) => {
      const rate = org?.plan === 'pro' ? deps.config.rateLimitPro : deps.config.rateLimitFree;
      const d = deps.rateLimiter.take(orgId, rate);
      if (d.limit > 0) {
        res.setHeader('RateLimit-Limit', String(d.limit));
        res.setHeader('RateLimit-Remaining', String(d.remaining));
        res.setHeader('RateLimit-Reset', String(d.resetSeconds));
      }
      if (d.allowed) return next();
      deps.metrics.rateLimited.inc();
      next(new ApiError(429, 'Rate limit exceeded', null, { 'Retry-After': String(d.retryAfterSeconds) }));
    }, next);
  };
}
