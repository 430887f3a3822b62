import { generationalMap } from '../lib/bounded-map.ts';
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

/** Sources the cache keeps at least (at most twice); an evicted one costs one KV read when it next matters. */
export const STATE_CACHE_SIZE = 50_000;

/**
 * The KV store behind a cache the notifier reader owns for one lease term: the reader
 * is the bucket's only writer, so what it wrote or read stays true while it holds the
 * lease. `created` records that a source was just created (its create event, read on
 * the source's own chain): no state exists for it, so its first outcome costs no read.
 * That hint is wrong only for a create read again after a restart, whose later events
 * were already handled: they are then decided again from no state, the same
 * transitions with the same notification ids, which NOTIFY's duplicate window drops,
 * and the same state is written back.
 */
export interface CachedNotifyState extends NotifyStateStore {
  created(orgId: string, sourceId: string): void;
  /** The state as cached, without a read: undefined when not cached (null: none). */
  peek(orgId: string, sourceId: string): SourceState | null | undefined;
}

export function cachedNotifyState(store: NotifyStateStore, size = STATE_CACHE_SIZE): CachedNotifyState {
  // Two generations, not an LRU of deletes and re-inserts: see `generationalMap`.
  const cache = generationalMap<SourceState | null>(size);
  const remember = (key: string, state: SourceState | null) => cache.set(key, state);
  return {
    async get(orgId, sourceId) {
      const key = stateKey(orgId, sourceId);
      const known = cache.get(key);
      if (known !== undefined) return known;
      const state = await store.get(orgId, sourceId);
      remember(key, state);
      return state;
    },
    async put(orgId, sourceId, state) {
      await store.put(orgId, sourceId, state);
      remember(stateKey(orgId, sourceId), state);
    },
    async forget(orgId, sourceId) {
      await store.forget(orgId, sourceId);
      remember(stateKey(orgId, sourceId), null);
    },
    created(orgId, sourceId) {
      const key = stateKey(orgId, sourceId);
      if (!cache.has(key)) remember(key, null);
    },
    peek(orgId, sourceId) {
      return cache.get(stateKey(orgId, sourceId));
    },
  };
}

/** The subjects of the bucket's keys (a bucket of this NATS account, no mirror or domain). */
const KV_PREFIX = `$KV.${KV_BUCKETS.notifyState.name}.`;

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
