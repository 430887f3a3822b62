import { derivedId } from '../lib/ids.ts';
import type { Endpoint } from '../commands/endpoint/types.ts';
import type { ForwardPlan, InboundEventEvent, InboundEventRecord, InboundOutcome } from '../commands/inbound-event/types.ts';
import { parseDuration } from '../lib/duration.ts';
import { ApiError } from '../lib/errors.ts';
import type { ScriptEngine } from '../scripts/engine.ts';
import { endpointScriptHooks, type EndpointScriptHooks } from './endpoint-hooks.ts';
import { LOG_LINES } from '../scripts/limits.ts';
import { headerObject, type InboundRequestMeta, type RequestRoute, type StoredRequest } from './stored-request.ts';

/**
 * The inbound pipeline, in the spec's order: receive, verify (on the original
 * request), filter (on the original request), custom forwarding (forward_method,
 * forward_headers, forward_body), transform, route, forward. `receive` and `verify`
 * run where the request arrives (the sender's answer depends on them); the rest
 * runs in the router. Hooks are the endpoint script's functions; an endpoint
 * without a script (or a process without a script engine) gets `null` and every
 * hook stage passes the request through.
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

export type HooksFor = (endpoint: Endpoint) => EndpointScriptHooks | null;

/** No script engine: every endpoint forwards with its custom forwarding values only. */
export const noHooks: HooksFor = () => null;

/**
 * The endpoint's script, when it has one, as hooks over the engine: made once per
 * endpoint version (the directory hands out the same object until the endpoint
 * changes), not once per request.
 */
export function scriptHooks(engine: ScriptEngine): HooksFor {
  const made = new WeakMap<Endpoint, EndpointScriptHooks>();
  return (endpoint) => {
    if (!endpoint.script) return null;
    let hooks = made.get(endpoint);
    if (!hooks) made.set(endpoint, (hooks = endpointScriptHooks(engine, endpoint.script)));
    return hooks;
  };
}

/** Every hook call of one event logs into one list: at most the contract's 100 lines, the rest counted. */
export function joinLogs(...lists: (readonly string[] | undefined)[]): string[] {
  const all = lists.flatMap((l) => l ?? []);
  if (all.length <= LOG_LINES) return all;
  return [...all.slice(0, LOG_LINES - 1), `… ${all.length - LOG_LINES + 1} more lines not kept`];
}

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
export function eventRecord(
  meta: RequestRoute,
  inboundSeq: number,
  outcome: InboundOutcome,
  delivery?: Pick<RoutedDelivery, 'script_logs' | 'error_message' | 'debounce'>,
): InboundEventRecord {
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
    ...(delivery?.script_logs.length ? { script_logs: delivery.script_logs } : {}),
    ...(delivery?.error_message ? { error_message: delivery.error_message } : {}),
    ...(delivery?.debounce ? { debounce_key: delivery.debounce.key } : {}),
  };
}

/** The endpoint as its deliveries need it later. */
export const endpointSnapshot = (e: Endpoint) => ({ id: e.id, name: e.name, use_lane: e.use_lane, retry_attempts: e.retry_attempts });

/**
 * The event recording one stored request's deliveries (`delivery` decided them;
 * `planned` is what is recorded: a debounce may have moved them into a window).
 * The router's and, for requests no hook touches, the receiver's: the same event
 * under the same id (`<request id>.received`) whichever writes it.
 */
export function receivedEvent(
  meta: RequestRoute,
  inboundSeq: number,
  endpoint: Endpoint,
  delivery: RoutedDelivery,
  planned: Pick<RoutedDelivery, 'outcome' | 'executions'>,
  at: string,
): InboundEventEvent {
  return {
    type: 'InboundEventReceived',
    id: `${meta.id}.received`,
    at,
    org_id: meta.org_id,
    data: { event: eventRecord(meta, inboundSeq, planned.outcome, delivery), endpoint: endpointSnapshot(endpoint), executions: planned.executions },
  };
}

/** Whether the receiver records its endpoint's requests itself (`plannedAtReceipt`). */
export const recordedAtReceipt = (endpoint: Endpoint): boolean => !endpoint.script;

/**
 * A request's deliveries when no hook can touch them (an endpoint without a script),
 * decided where it arrives: null when the router must decide (the endpoint has a
 * script: all its requests go the router's way, so they keep one order). The
 * execution ids are the ones the router would plan.
 */
export function plannedAtReceipt(endpoint: Endpoint, meta: RequestRoute): RoutedDelivery | null {
  if (!recordedAtReceipt(endpoint)) return null;
  let receivedMs: number | undefined;
  return plannedWithoutHooks({
    endpoint, route: meta, hooks: null, now: meta.received_at,
    executionId: (i) => plannedExecutionId(meta.id, (receivedMs ??= Date.parse(meta.received_at)), i),
  });
}

/**
 * The script engine could not run a hook (busy, stopping): plan the event again later.
 * The router's read retries the batch; a replay answers 503 with Retry-After.
 */
export class ScriptsUnavailableError extends ApiError {
  constructor(message: string) {
    super(503, `The endpoint script could not run now (${message}); retry`, null, { 'Retry-After': '1' });
    this.name = 'ScriptsUnavailableError';
  }
}

export interface RoutedDelivery {
  outcome: InboundOutcome;
  executions: ForwardPlan[];
  /** What the event's hooks logged, verify's first. */
  script_logs: string[];
  /** Why the event forwards nothing as planned: verify's rejection, or a hook's error. */
  error_message: string | null;
  /** transform()'s `debounce_key` and `debounce`: the router merges the event into that key's window. */
  debounce: { key: string; window_ms: number } | null;
}

/**
 * The longest debounce window: the latest request of a window must still be stored
 * (INBOUND keeps 30 days) when the window ends and it is forwarded.
 */
export const MAX_INBOUND_DEBOUNCE_MS = 30 * 86_400_000;

/**
 * The deliveries of a request no hook runs for (rejected by verify, or an endpoint
 * without a script), decided at once; null when a hook must see the request
 * (`planDelivery`). Synchronous: the router decides most requests without a promise.
 */
export function plannedWithoutHooks(opts: Omit<Parameters<typeof planDelivery>[0], 'request'>): RoutedDelivery | null {
  const { endpoint, route: meta } = opts;
  const logs = joinLogs(meta.verify_logs ?? []);
  if (meta.rejected) {
    return { outcome: 'rejected', executions: [], script_logs: logs, error_message: meta.rejected.reason ?? `rejected by verify with ${meta.rejected.status_code}`, debounce: null };
  }
  if (opts.hooks) return null;
  if (!endpoint.forward_urls.length) return { outcome: 'collected', executions: [], script_logs: logs, error_message: null, debounce: null };
  const executions = endpoint.forward_urls.map((url, i): ForwardPlan => ({
    execution_id: opts.executionId(i), url, method: endpoint.forward_method, headers: endpoint.forward_headers, body: endpoint.forward_body, scheduled_for: opts.now,
  }));
  return { outcome: 'forwarding', executions, script_logs: logs, error_message: null, debounce: null };
}

/**
 * Filter, custom forwarding, transform and route: the deliveries one stored request
 * makes. Without hooks its route decides; `request` (its headers and body, read from
 * INBOUND) is asked for only when a hook runs.
 */
export async function planDelivery(opts: {
  endpoint: Endpoint;
  route: RequestRoute;
  request: () => Promise<StoredRequest>;
  hooks: EndpointScriptHooks | null;
  now: string;
  executionId: (index: number) => string;
}): Promise<RoutedDelivery> {
  const { endpoint, hooks, route: meta } = opts;
  const logs: (readonly string[])[] = [meta.verify_logs ?? []];
  const done = (outcome: InboundOutcome, executions: ForwardPlan[], error: string | null = null, debounce: RoutedDelivery['debounce'] = null): RoutedDelivery =>
    ({ outcome, executions, script_logs: joinLogs(...logs), error_message: error, debounce });
  const plans = (urls: readonly string[], fields: Pick<ForwardPlan, 'method' | 'headers' | 'body'>, scriptError?: string): ForwardPlan[] =>
    urls.map((url, i) => ({ execution_id: opts.executionId(i), url, ...fields, scheduled_for: opts.now, ...(scriptError ? { script_error: scriptError } : {}) }));
  let fields: Pick<ForwardPlan, 'method' | 'headers' | 'body'> = { method: endpoint.forward_method, headers: endpoint.forward_headers, body: endpoint.forward_body };
  // A hook that fails fails the event's deliveries unforwarded: each execution records the error.
  // An engine that could not run it at all is no verdict on the event: the caller tries again.
  const failed = (out: { error: string; unavailable?: boolean }) => {
    if (out.unavailable) throw new ScriptsUnavailableError(out.error);
    const { error } = out;
    return endpoint.forward_urls.length ? done('forwarding', plans(endpoint.forward_urls, fields, error), error) : done('collected', [], error);
  };

  const planned = plannedWithoutHooks(opts);
  // Null only when there are hooks to run.
  if (planned || !hooks) return planned!;
  const request = await opts.request();
  const req = hookRequest(request.meta, request.body);

  const filtered = await hooks.filter(req);
  logs.push(filtered.logs);
  if (!filtered.ok) return failed(filtered);
  if (!filtered.value) return done('filtered', []);
  // Nowhere to forward: transform and route could change nothing.
  if (!endpoint.forward_urls.length) return done('collected', []);

  const transformed = await hooks.transform(req);
  logs.push(transformed.logs);
  if (!transformed.ok) return failed(transformed);
  let debounce: RoutedDelivery['debounce'] = null;
  const t = transformed.value;
  if (t) {
    // What transform() returns overrides the custom forwarding values; the rest keep them.
    fields = {
      method: t.method ?? fields.method,
      headers: t.headers !== undefined ? { ...(fields.headers ?? {}), ...t.headers } : fields.headers,
      body: t.body ?? fields.body,
    };
    if (t.debounce_key !== undefined && t.debounce !== undefined) {
      const ms = parseDuration(t.debounce);
      if (ms === undefined || ms <= 0 || ms > MAX_INBOUND_DEBOUNCE_MS) {
        return failed({ error: `transform: debounce must be a duration from 1s to 30d (a number followed by s, m, h or d), not ${JSON.stringify(t.debounce)}` });
      }
      debounce = { key: t.debounce_key, window_ms: ms };
    }
  }

  const routed = await hooks.route(req, endpoint.forward_urls);
  logs.push(routed.logs);
  if (!routed.ok) return failed(routed);
  const urls = routed.value ? endpoint.forward_urls.filter((u) => routed.value!.includes(u)) : endpoint.forward_urls;
  // route() chose none of them: stored, forwarded nowhere, as a filter would.
  if (!urls.length) return done('filtered', []);
  return done('forwarding', plans(urls, fields), null, debounce);
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
