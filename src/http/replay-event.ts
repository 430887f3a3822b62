import type { Selectable } from 'kysely';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import type { InboundEventsTable } from '../db/schema.ts';
import { endpointSnapshot, eventRecord, planDelivery, plannedExecutionId } from '../inbound/pipeline.ts';
import { loadStoredRequest, type StoredRequest } from '../inbound/stored-request.ts';
import { conflict, notFound, unprocessable } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import type { ApiDeps } from './context.ts';

/** A replay of some forward URLs only, each delivery linked to an earlier one (a retry, a bulk replay). */
export interface PartialReplay {
  /** The forward URLs to deliver to (a subset of the endpoint's). */
  urls: string[];
  /** The earlier delivery a new one to `url` retries, if any. */
  retryOf: (url: string) => string | undefined;
  /** The replay's event id (a bulk replay's, derived from its job and position, so a re-run can find it). */
  eventId?: string;
}

/**
 * Forwards a stored inbound request again through the endpoint's current scripts:
 * `InboundEventReplayed` with one plan per forward URL. `partial` keeps only the plans
 * to its URLs and marks each `retry_of` its earlier delivery; what cannot be replayed so
 * (the endpoint, its URLs or the stored request gone, the scripts sending the event
 * nowhere) is 409 `field: "source"`.
 */
export async function replayInboundEvent(
  deps: ApiDeps, orgId: string, row: Selectable<InboundEventsTable>, partial?: PartialReplay,
): Promise<{ ids: string[]; outcome: string; paused: boolean }> {
  const gone = (why: string) => (partial ? conflict(`The execution's source is gone: ${why}`, 'source') : notFound(why));
  const endpoint = await deps.endpoints.get(orgId, row.endpoint_id);
  if (!endpoint) throw gone('Endpoint not found');
  if (!endpoint.forward_urls.length) {
    if (partial) throw gone('the endpoint has no forward_urls any more');
    throw unprocessable('the endpoint has no forward_urls: it only collects events', 'forward_urls');
  }
  const urls = partial ? partial.urls.filter((u) => endpoint.forward_urls.includes(u)) : endpoint.forward_urls;
  if (!urls.length) throw gone(`the endpoint no longer forwards to ${partial!.urls.join(', ')}`);
  const stored = await loadStoredRequest(deps.nats, Number(row.inbound_seq), row.id);
  if (!stored) throw gone('Inbound event is no longer stored');
  // A replay is the user's explicit choice: verify's verdict on the original does not stop it.
  const request: StoredRequest = { meta: { ...stored.meta, rejected: undefined, verify_logs: undefined }, body: stored.body };
  const nowMs = deps.clock.now();
  const now = new Date(nowMs).toISOString();
  const replayId = partial?.eventId ?? newId('evt', nowMs);
  const delivery = await planDelivery({ endpoint, route: request.meta, request: async () => request, hooks: deps.hooks(endpoint), now, executionId: (i) => plannedExecutionId(replayId, nowMs, i) });
  const executions = partial
    ? delivery.executions.filter((x) => urls.includes(x.url)).map((x) => {
      const of = partial.retryOf(x.url);
      return of ? { ...x, retry_of: of } : x;
    })
    : delivery.executions;
  if (partial && !executions.length) throw gone(`the endpoint's scripts send this event nowhere now (${delivery.outcome})`);
  const subject = SUBJECTS.inboundEvent(orgId, row.id);
  // Replays of one event are independent of each other: no guard on the subject's sequence.
  const event: InboundEventEvent = {
    type: 'InboundEventReplayed', id: replayId, at: now, org_id: orgId,
    // A replay forwards now: transform()'s debounce applies to live traffic only.
    data: { event: eventRecord(stored.meta, Number(row.inbound_seq), delivery.outcome, { ...delivery, debounce: null }), endpoint: endpointSnapshot(endpoint), executions },
  };
  await deps.reads.wrote(orgId, await deps.store.append(subject, event));
  return { ids: executions.map((x) => x.execution_id), outcome: delivery.outcome, paused: endpoint.paused };
}
