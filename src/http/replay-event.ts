import type { Selectable } from 'kysely';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { InboundEventsTable } from '../db/schema.ts';
import { decideInboundReplay, type PartialReplay } from '../inbound/replay-decision.ts';
import type { ApiDeps } from './context.ts';

/**
 * The single replay and a retry of one delivery: `decideInboundReplay`, appended on the
 * event's subject. What cannot be replayed (the endpoint, its URLs or the stored request
 * gone, the scripts sending the event nowhere) is 404, or with `partial` 409 `field: "source"`.
 */
export async function replayInboundEvent(
  deps: ApiDeps, orgId: string, row: Selectable<InboundEventsTable>, partial?: PartialReplay,
): Promise<{ ids: string[]; outcome: string; paused: boolean }> {
  const { event, ids, outcome, paused } = await decideInboundReplay(deps, orgId, row, partial);
  // Replays of one event are independent of each other: no guard on the subject's sequence.
  await deps.reads.wrote(orgId, await deps.store.append(SUBJECTS.inboundEvent(orgId, row.id), event));
  return { ids, outcome, paused };
}
