import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { FLOW_KEY_EVENT_TYPES, type FlowKeyEvent } from '../commands/flow-control/types.ts';
import type { Nats } from '../nats/connection.ts';
import { decodeEvents } from '../nats/event-reader.ts';
import { lastOfEach } from '../nats/last-of-each.ts';

/**
 * The last pause or resume of every flow-control key: an owner taking over reads these
 * before the log, because a key paused long before the oldest live execution of its
 * partition is still paused. Keys are few (one subject each, `SUBJECTS.flowKey`); a
 * failed call rejects, and the claim is tried again.
 */
export async function readFlowKeyStates(nats: Nats): Promise<FlowKeyEvent[]> {
  const out: FlowKeyEvent[] = [];
  for (const msg of await lastOfEach(nats, STREAMS.events.name, SUBJECTS.flowKeys)) {
    for (const e of decodeEvents(msg.data)) if (FLOW_KEY_EVENT_TYPES.has(e.type)) out.push(e as FlowKeyEvent);
  }
  return out;
}
