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

/** The organization and key an `Authorization` header names; 401 unless it holds a full `pk_….sk_…` key that is live. */
export async function authenticated(deps: Pick<ApiDeps, 'directory'>, header: string | undefined): Promise<{ orgId: string; keyId: string }> {
  const m = /^Bearer\s+(\S+)$/i.exec(header ?? '');
  const parsed = m ? parseApiKey(m[1]!) : null;
  if (!parsed) throw new ApiError(401, header ? 'Invalid API key' : 'Missing API key: send Authorization: Bearer <API_KEY>');
  const key = await deps.directory.apiKey(parsed.publicId);
  if (!key || key.revoked_at || !matches(key, parsed.secret)) throw invalid();
  return { orgId: key.org_id, keyId: key.public_id };
}

/** Only the full `pk_….sk_…` key authenticates; the public part alone does not. */
export function authenticate(deps: ApiDeps) {
  return (req: Request, _res: Response, next: NextFunction) => {
    authenticated(deps, req.headers.authorization).then(({ orgId, keyId }) => {
      (req as AuthedRequest).orgId = orgId;
      (req as AuthedRequest).keyId = keyId;
      next();
    }, next);
  };
}

/**
 * Takes one request from the organization's rate: the `RateLimit-*` headers to answer
 * with (none when the plan's rate is unlimited), and a 429 to answer instead when over.
 */
export async function rateTaken(deps: Pick<ApiDeps, 'directory' | 'config' | 'rateLimiter' | 'metrics'>, orgId: string): Promise<{ headers: Record<string, string>; refused: ApiError | null }> {
  const org = await deps.directory.organization(orgId);
  const rate = org?.plan === 'pro' ? deps.config.rateLimitPro : deps.config.rateLimitFree;
  const d = deps.rateLimiter.take(orgId, rate);
  const headers: Record<string, string> = d.limit > 0
    ? { 'RateLimit-Limit': String(d.limit), 'RateLimit-Remaining': String(d.remaining), 'RateLimit-Reset': String(d.resetSeconds) }
    : {};
  if (d.allowed) return { headers, refused: null };
  deps.metrics.rateLimited.inc();
  return { headers, refused: new ApiError(429, 'Rate limit exceeded', null, { 'Retry-After': String(d.retryAfterSeconds) }) };
}

export function rateLimit(deps: ApiDeps) {
  return (req: Request, res: Response, next: NextFunction) => {
    rateTaken(deps, (req as AuthedRequest).orgId).then(({ headers, refused }) => {
      for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
      next(refused ?? undefined);
    }, next);
  };
}
