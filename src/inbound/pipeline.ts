import { derivedId } from '../lib/ids.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';
import type { ForwardPlan, InboundEventRecord, InboundOutcome } from '../commands/inbound-event/types.ts';
import { headerObject, type InboundRequestMeta, type StoredRequest } from './stored-request.ts';

/**
 * The inbound pipeline, in the spec's order: receive, verify (on the original
 * request), filter (on the original request), custom forwarding (forward_method,
 * forward_headers, forward_body), transform, route, forward. `receive` and `verify`
 * run where the request arrives (the sender's answer depends on them); the rest
 * runs in the router. Hooks are the endpoint script's functions; an endpoint
 * without one (or a process without a script engine) gets `null` and every hook
 * stage passes the request through.
 */
export interface HookRequest {
  method: string;
  path: string;
  query: string;
  /** Lower-case names, values joined with ", " when repeated. */
  headers: Record<string, string>;
  body: string;
  source_ip: string | null;
}

export interface TransformResult {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface InboundHooks {
  verify?(req: HookRequest): Promise<{ accepted: true } | { accepted: false; status_code: number }>;
  filter?(req: HookRequest): Promise<boolean>;
  transform?(req: HookRequest): Promise<TransformResult | null>;
  route?(req: HookRequest): Promise<string[] | null>;
}

export type HooksFor = (endpoint: Endpoint) => InboundHooks | null;

/** No script engine yet: every endpoint forwards with its custom forwarding values only. */
export const noHooks: HooksFor = () => null;

export function hookRequest(meta: InboundRequestMeta, body: Buffer): HookRequest {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(headerObject(meta.headers))) headers[name.toLowerCase()] = value;
  return { method: meta.method, path: meta.path, query: meta.query, headers, body: body.toString('utf8'), source_ip: meta.source_ip };
}

/** Stable per (event, position) so a router that re-runs after a crash plans the same executions; sorts in forward_urls order. */
export function plannedExecutionId(seed: string, atMs: number, index: number): string {
  return derivedId('exe', atMs, seed, index);
}

/** What an `InboundEventReceived`/`Replayed` records of the request (not its headers or body). */
export function eventRecord(meta: InboundRequestMeta, inboundSeq: number, outcome: InboundOutcome): InboundEventRecord {
  return {
    id: meta.id,
    endpoint_id: meta.endpoint_id,
    method: meta.method,
    path: meta.path,
    query: meta.query,
    source_ip: meta.source_ip,
    received_at: meta.received_at,
    body_size: meta.body_size,
    inbound_seq: inboundSeq,
    outcome,
  };
}

/** The endpoint as its deliveries need it later. */
export const endpointSnapshot = (e: Endpoint) => ({ id: e.id, name: e.name, use_lane: e.use_lane, retry_attempts: e.retry_attempts });

export interface RoutedDelivery {
  outcome: InboundOutcome;
  executions: ForwardPlan[];
}

/** Filter, custom forwarding, transform and route: the deliveries one stored request makes. */
export async function planDelivery(opts: {
  endpoint: Endpoint;
  request: StoredRequest;
  hooks: InboundHooks | null;
  now: string;
  executionId: (index: number) => string;
}): Promise<RoutedDelivery> {
  const { endpoint, request, hooks } = opts;
  if (request.meta.rejected) return { outcome: 'rejected', executions: [] };
  const hookReq = hooks ? hookRequest(request.meta, request.body) : null;
  if (hooks?.filter && !(await hooks.filter(hookReq!))) return { outcome: 'filtered', executions: [] };
  let method = endpoint.forward_method;
  let headers = endpoint.forward_headers;
  let body = endpoint.forward_body;
  const transformed = hooks?.transform ? await hooks.transform(hookReq!) : null;
  if (transformed) {
    // What transform() returns overrides the custom forwarding values; the rest keep them.
    if (transformed.method !== undefined) method = transformed.method;
    if (transformed.headers !== undefined) headers = { ...(headers ?? {}), ...transformed.headers };
    if (transformed.body !== undefined) body = transformed.body;
  }
  let urls = endpoint.forward_urls;
  if (hooks?.route) {
    const chosen = await hooks.route(hookReq!);
    if (chosen) urls = urls.filter((u) => chosen.includes(u));
  }
  if (!endpoint.forward_urls.length) return { outcome: 'collected', executions: [] };
  return {
    outcome: 'forwarding',
    executions: urls.map((url, i) => ({ execution_id: opts.executionId(i), url, method, headers, body, scheduled_for: opts.now })),
  };
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) and those the forwarding request sets itself. */
const NOT_FORWARDED = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'content-length', 'expect',
]);

export interface ForwardRequest {
  method: string;
  headers: Record<string, string>;
  body: Buffer | null;
  /** The inbound query string (without `?`), added to the forward URL's own. */
  query: string;
}

/** The forward URL with the inbound request's query string after its own. */
export function forwardUrl(url: string, query: string): string {
  if (!query) return url;
  const hash = url.indexOf('#');
  const base = hash < 0 ? url : url.slice(0, hash);
  return `${base}${base.includes('?') ? '&' : '?'}${query}`;
}

/** The request one plan sends: the stored original with the plan's replacements. */
export function forwardRequest(stored: StoredRequest, plan: Pick<ForwardPlan, 'method' | 'headers' | 'body'>): ForwardRequest {
  const connectionNamed = new Set(
    stored.meta.headers.filter(([n]) => n.toLowerCase() === 'connection').flatMap(([, v]) => v.split(',').map((s) => s.trim().toLowerCase())),
  );
  const kept = stored.meta.headers.filter(([n]) => {
    const lower = n.toLowerCase();
    return !NOT_FORWARDED.has(lower) && !connectionNamed.has(lower) && !lower.startsWith('x-jetcron-');
  });
  const headers = headerObject(kept);
  for (const [name, value] of Object.entries(plan.headers ?? {})) {
    // Custom headers win whatever their case.
    for (const existing of Object.keys(headers)) if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing];
    headers[name] = value;
  }
  const body = plan.body !== null ? Buffer.from(plan.body, 'utf8') : stored.body;
  return { method: plan.method ?? stored.meta.method, headers, body: body.length ? body : null, query: stored.meta.query };
}
