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
/**
 * What a notification announces. `nextState` makes failures and recoveries; `disabled`
 * (a schedule or forward URL turned off after failing for long, the contract's
 * destination health) is decided elsewhere and only planned and sent here.
 */
export type Transition = 'failed' | 'recovered' | 'disabled';

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
): { transition: 'failed' | 'recovered'; state: SourceState } | null {
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

/** Sources a term's state keeps in memory at least (at most twice); an evicted one costs one KV read when it next matters. */
export const STATE_CACHE_SIZE = 50_000;

/**
 * The store a lease term's decider uses (`journaledNotifyState`): the reader is the
 * only writer while it holds the lease, so what it wrote or read stays true for the
 * term. `created` records that a source was just created (its create event, read on
 * the source's own chain): no state exists for it, so its first outcome costs no read.
 * That hint is wrong only for a create read again after a restart, whose later events
 * were already handled: they are then decided again from no state, the same
 * transitions with the same notification ids, which NOTIFY's duplicate window drops,
 * and the same state is written back.
 */
export interface CachedNotifyState extends NotifyStateStore {
  created(orgId: string, sourceId: string): void;
  /** The state as known, without a read: undefined when not known (null: none). */
  peek(orgId: string, sourceId: string): SourceState | null | undefined;
}

/** The subjects of the bucket's keys (a bucket of this NATS account, no mirror or domain). */
const KV_PREFIX = `$KV.${KV_BUCKETS.notifyState.name}.`;

/** The per-key store under the journal (`journaledNotifyState`): what compactions write. */
export async function openNotifyState(nats: Nats): Promise<NotifyStateStore> {
  const kv: KV = await new Kvm(nats.nc).open(KV_BUCKETS.notifyState.name);
  return {
    async get(orgId, sourceId) {
      const e = await kv.get(stateKey(orgId, sourceId));
      return e && e.value.length ? decodeJson<SourceState>(e.value) : null;
    },
    async put(orgId, sourceId, state) {
      // What `kv.put` publishes, through the process's shared acked publisher: `kv.put` is a
      // JetStream request of its own (a reply subject, a timer, an options object) per
      // transition, a tenth of the notifier's CPU when monitors go down by the thousand.
      await nats.publish(`${KV_PREFIX}${stateKey(orgId, sourceId)}`, encodeJson(state), { traceparent: undefined });
    },
    async forget(orgId, sourceId) {
      await kv.delete(stateKey(orgId, sourceId));
    },
  };
}
