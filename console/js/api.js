// The console's only way to the service: the same public API as every client, with the
// signed-in key as the bearer token.
import { currentKey } from './session.js';

export const API_BASE = '/api/v1';

/** An answer other than 2xx: the contract's `{error: {message, field}}`. */
export class ApiError extends Error {
  constructor(status, message, field = null) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

const listeners = new Set();
/** Called with every 401, so the app can return to sign-in when the key stops working. */
export function onUnauthorized(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RATE_LIMIT_TRIES = 3;

/**
 * `api('GET', '/tasks')` → the parsed body (null for 204). A 429 waits for Retry-After
 * and tries again (a few times), so a page that makes many reads on a Free plan's rate
 * limit still loads.
 */
export async function api(method, path, body, { key = currentKey(), signal } = {}) {
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(`${API_BASE}${path}`, {
      method,
      headers: {
        Accept: 'application/json',
        ...(key ? { Authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'omit',
      cache: 'no-store',
    });
    if (res.status === 429 && attempt < RATE_LIMIT_TRIES) {
      const wait = Number(res.headers.get('Retry-After'));
      await sleep(Number.isFinite(wait) && wait > 0 ? Math.min(wait, 10) * 1000 : 1000);
      continue;
    }
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (res.ok) return parsed;
    if (res.status === 401) for (const fn of listeners) fn();
    const error = parsed && typeof parsed === 'object' ? parsed.error : null;
    throw new ApiError(res.status, error?.message ?? `${res.status} ${res.statusText}`, error?.field ?? null);
  }
}

/** A query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * Every page of `/executions` matching `params`, newest first, up to `cap` rows.
 * Returns the rows and whether the cap cut the list short.
 */
export async function allExecutions(params, { cap = 2000, signal } = {}) {
  // By id: an execution created while paging shifts the offsets and shows a row twice.
  const rows = new Map();
  const limit = 100;
  for (let offset = 0; rows.size < cap; offset += limit) {
    const page = await api('GET', `/executions${query({ ...params, limit, offset })}`, undefined, { signal });
    for (const row of page.data) rows.set(row.id, row);
    if (!page.has_more) return { rows: [...rows.values()], capped: false };
  }
  return { rows: [...rows.values()].slice(0, cap), capped: true };
}
