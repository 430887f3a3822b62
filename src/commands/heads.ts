import type { EventStore } from './store.ts';
import { boundedMap, type BoundedMap } from '../lib/bounded-map.ts';

/** An aggregate's state after an append this process made, and that append's stream sequence. */
export interface Head<S> {
  state: S;
  seq: number;
}

/**
 * What this process last appended to each subject of one aggregate kind, so the next
 * command on it can decide without a direct get. A remembered head is a guess, never
 * an authority: another process (an API copy, the scheduler's deadline check) may have
 * appended since, so a decision from it counts only once its guarded append is stored
 * (`executeOnce`): a wrong last sequence, or a decision that refuses or does nothing,
 * drops the head and decides again from the log. Kept per store (per NATS connection),
 * as the per-subject queue is, which makes this process the single writer of what it
 * remembers; at most `max` subjects, the oldest forgotten first.
 */
export function createHeads<S>(max: number) {
  const perStore = new WeakMap<EventStore, BoundedMap<Head<S>>>();
  const of = (store: EventStore) => {
    let heads = perStore.get(store);
    if (!heads) perStore.set(store, (heads = boundedMap<Head<S>>(max)));
    return heads;
  };
  return {
    get: (store: EventStore, subject: string): Head<S> | undefined => perStore.get(store)?.get(subject),
    /** After a stored append; a null state (the aggregate is gone) is not kept. */
    set(store: EventStore, subject: string, state: S | null, seq: number): void {
      if (state === null) perStore.get(store)?.delete(subject);
      else of(store).set(subject, { state, seq });
    },
    drop: (store: EventStore, subject: string): void => perStore.get(store)?.delete(subject),
  };
}

export type Heads<S> = ReturnType<typeof createHeads<S>>;
