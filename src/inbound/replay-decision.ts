import type { Selectable } from 'kysely';
import { decideReplay, replayUrls, requestGone, type ReplayScope } from '../commands/inbound-event/replay.ts';
import type { InboundEventEvent } from '../commands/inbound-event/types.ts';
import type { Clock } from '../lib/clock.ts';
import type { InboundEventsTable } from '../db/schema.ts';
import type { Nats } from '../nats/connection.ts';
import type { EndpointDirectory } from './endpoint-directory.ts';
import { endpointSnapshot, eventRecord, planDelivery, plannedExecutionId, type HooksFor } from './pipeline.ts';
import { loadStoredRequest, type StoredRequest } from './stored-request.ts';
import { newId } from '../lib/ids.ts';

/** What deciding a replay reads: the endpoint, the stored request, the scripts, the time. */
export interface ReplayDeps {
  nats: Nats;
  clock: Clock;
  endpoints: EndpointDirectory;
  hooks: HooksFor;
}

/** A replay of some forward URLs only (`ReplayScope`), under an event id of the caller's (a bulk job's, derived from its position). */
export interface PartialReplay extends ReplayScope {
  eventId?: string;
}

/** A replay decided, not yet appended: its event, the new deliveries, what the scripts made of it. */
export interface DecidedReplay {
  event: InboundEventEvent;
  ids: string[];
  outcome: string;
  paused: boolean;
}

/**
 * Forwards a stored inbound request again through the endpoint's current scripts:
 * loads the endpoint and the stored request, runs the scripts (`planDelivery`) and
 * decides `InboundEventReplayed` (`decideReplay`), appending nothing: a bulk job puts
 * the event in its group's commit, `replayInboundEvent` on the event's subject.
 */
export async function decideInboundReplay(deps: ReplayDeps, orgId: string, row: Selectable<InboundEventsTable>, partial?: PartialReplay): Promise<DecidedReplay> {
  const scope = partial ?? null;
  const endpoint = await deps.endpoints.get(orgId, row.endpoint_id);
  const urls = replayUrls(endpoint, scope);
  const stored = await loadStoredRequest(deps.nats, Number(row.inbound_seq), row.id);
  if (!stored || !endpoint) throw requestGone(scope);
  // A replay is the user's explicit choice: verify's verdict on the original does not stop it.
  const request: StoredRequest = { meta: { ...stored.meta, rejected: undefined, verify_logs: undefined }, body: stored.body };
  const nowMs = deps.clock.now();
  const now = new Date(nowMs).toISOString();
  const replayId = partial?.eventId ?? newId('evt', nowMs);
  const delivery = await planDelivery({ endpoint, route: request.meta, request: async () => request, hooks: deps.hooks(endpoint), now, executionId: (i) => plannedExecutionId(replayId, nowMs, i) });
  const event = decideReplay({
    orgId, replayId, now, urls, scope, plans: delivery.executions, endpoint: endpointSnapshot(endpoint),
    // A replay forwards now: transform()'s debounce applies to live traffic only.
    record: eventRecord(stored.meta, Number(row.inbound_seq), delivery.outcome, { ...delivery, debounce: null }),
  });
  return { event, ids: event.data.executions.map((x) => x.execution_id), outcome: delivery.outcome, paused: endpoint.paused };
}
