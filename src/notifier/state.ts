import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';

/**
 * Per source (task, schedule, monitor, endpoint): is it failing right now, and which
 * EVENTS sequence last changed that. Only transitions are written.
 */
export interface SourceState {
  failing: boolean;
  /** EVENTS sequence of the event that made this transition: a replayed older event is ignored. */
  seq: number;
  /** When the transition happened (the deciding event's time). */
  since: string;
  /** The execution that made it, when there is one. */
  execution_id: string | null;
}

export type Outcome = 'failure' | 'success';
export type Transition = 'failed' | 'recovered';

/**
 * The failure/recovery state machine. A failure while not failing is the first of a
 * sequence (notify); a success while failing is a recovery (notify); anything else
 * changes nothing. An event at or below the stored sequence was decided before (a
 * replay after a restart) and changes nothing either.
 */
export function nextState(
  prev: SourceState | null,
  outcome: Outcome,
  at: { seq: number; time: string; executionId: string | null },
): { transition: Transition; state: SourceState } | null {
  if (prev && prev.seq >= at.seq) return null;
  const failing = prev?.failing ?? false;
  if (outcome === 'failure' && !failing) {
    return { transition: 'failed', state: { failing: true, seq: at.seq, since: at.time, execution_id: at.executionId } };
  }
  if (outcome === 'success' && failing) {
    return { transition: 'recovered', state: { failing: false, seq: at.seq, since: at.time, execution_id: at.executionId } };
  }
  return null;
}

export const stateKey = (orgId: string, sourceId: string) => `${orgId}.${sourceId}`;

export interface NotifyStateStore {
  get(orgId: string, sourceId: string): Promise<SourceState | null>;
  put(orgId: string, sourceId: string, state: SourceState): Promise<void>;
  /** The source is gone (deleted): forget it. */
  forget(orgId: string, sourceId: string): Promise<void>;
}

export async function openNotifyState(nats: Nats): Promise<NotifyStateStore> {
  const kv: KV = await new Kvm(nats.nc).open(KV_BUCKETS.notifyState.name);
  return {
    async get(orgId, sourceId) {
      const e = await kv.get(stateKey(orgId, sourceId));
      return e && e.value.length ? decodeJson<SourceState>(e.value) : null;
    },
    async put(orgId, sourceId, state) {
      await kv.put(stateKey(orgId, sourceId), encodeJson(state));
    },
    async forget(orgId, sourceId) {
      await kv.delete(stateKey(orgId, sourceId));
    },
  };
}
