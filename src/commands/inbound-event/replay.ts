import { notFound, unprocessable } from '../../lib/errors.ts';
import { sourceGone } from '../execution/retry.ts';
import type { EndpointSnapshot, ForwardPlan, InboundEventEvent, InboundEventRecord } from './types.ts';

/** A replay of some forward URLs only, each delivery linked to an earlier one (a retry, a bulk replay). */
export interface ReplayScope {
  /** The forward URLs to deliver to (a subset of the endpoint's). */
  urls: string[];
  /** The earlier delivery a new one to `url` retries, if any. */
  retryOf: (url: string) => string | undefined;
}

/** What cannot be replayed: a retry's or a job's source is gone (409 `field: "source"`); a single replay's is not found. */
const gone = (scope: ReplayScope | null, why: string) => (scope ? sourceGone(why) : notFound(why));

/**
 * The forward URLs a replay goes to, before its request is read: the endpoint's (a
 * single replay), or those of `scope` it still forwards to. The endpoint deleted, with
 * no forward URLs, or no longer forwarding to any of `scope`'s: refused.
 */
export function replayUrls(endpoint: { forward_urls: string[] } | null, scope: ReplayScope | null): string[] {
  if (!endpoint) throw gone(scope, 'Endpoint not found');
  if (!endpoint.forward_urls.length) {
    if (scope) throw gone(scope, 'the endpoint has no forward_urls any more');
    throw unprocessable('the endpoint has no forward_urls: it only collects events', 'forward_urls');
  }
  if (!scope) return endpoint.forward_urls;
  const urls = scope.urls.filter((u) => endpoint.forward_urls.includes(u));
  if (!urls.length) throw gone(scope, `the endpoint no longer forwards to ${scope.urls.join(', ')}`);
  return urls;
}

/** The stored request of the event is gone (INBOUND's 30 days, or its endpoint deleted): nothing to replay. */
export const requestGone = (scope: ReplayScope | null) => gone(scope, 'Inbound event is no longer stored');

/**
 * `InboundEventReplayed`: the event's request forwarded again, as the endpoint's scripts
 * plan it now (`plans`, `outcome`: `planDelivery`'s, run by the caller). With `scope`,
 * only its URLs' plans, each `retry_of` its earlier delivery; none left (the scripts
 * send the event nowhere now) is refused. Pure: the single replay, a retry of a
 * delivery and a bulk job's group decide the same event here, whatever they append it to.
 */
export function decideReplay(r: {
  orgId: string;
  replayId: string;
  now: string;
  record: InboundEventRecord;
  endpoint: EndpointSnapshot;
  urls: string[];
  plans: ForwardPlan[];
  scope: ReplayScope | null;
}): InboundEventEvent {
  const { scope } = r;
  const executions = scope
    ? r.plans.filter((x) => r.urls.includes(x.url)).map((x) => {
      const of = scope.retryOf(x.url);
      return of ? { ...x, retry_of: of } : x;
    })
    : r.plans;
  if (scope && !executions.length) throw gone(scope, `the endpoint's scripts send this event nowhere now (${r.record.outcome})`);
  return { type: 'InboundEventReplayed', id: r.replayId, at: r.now, org_id: r.orgId, data: { event: r.record, endpoint: r.endpoint, executions } };
}
