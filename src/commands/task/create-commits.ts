import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../store.ts';
import { eventJson } from '../upcast.ts';
import { COMMIT_MAX_BYTES } from '../commit.ts';
import { memberId, newId, withSeqHint } from '../../lib/ids.ts';
import { createTurnGroups } from '../../lib/turn-groups.ts';
import type { TaskEvent } from './types.ts';

/** A commit closes at this many events or at `COMMIT_MAX_BYTES`; the next create opens another. */
const MAX_EVENTS = 256;

/**
 * The single creates of one turn of the event loop, per organization, in one commit on
 * one of the organization's create subjects (`SUBJECTS.creates`, chosen by the commit's
 * id), each task under an id that names the commit (`memberId`), and the commit's id a
 * stream sequence below its own (`withSeqHint`): one stored message for the turn, where
 * there was one per task, and no subject per task or commit (`createdInBatch` reads it
 * back). All of a commit's creates are stored, or none (each request then answers the
 * failure).
 */
export function createCommits(store: EventStore) {
  const groups = createTurnGroups<{ event: TaskEvent; text: string }>(
    { maxCount: MAX_EVENTS, maxBytes: COMMIT_MAX_BYTES },
    () => withSeqHint(newId('cmd'), store.knownSeq?.() ?? 0),
    // Many commits share the subject: no expected last sequence (a retried publish is one message by its id).
    (g) => store.appendCommit(SUBJECTS.creates(g.key, g.id), g.items.map((i) => i.event), undefined, g.items.map((i) => i.text)),
  );

  return {
    /**
     * Decides one create under the id its place in this turn's commit gives (`decide`
     * runs at once, so a refusal leaves only a gap in the numbering), and resolves with
     * the commit's sequence once it is stored.
     */
    async create(orgId: string, decide: (taskId: string) => TaskEvent[]): Promise<{ events: TaskEvent[]; seq: number }> {
      const group = groups.join(orgId);
      const decided = decide(memberId('tsk', group.id, group.count++));
      // Each keeps the trace of the request that decided it: the commit is appended outside it.
      const traceparent = store.traceparent?.();
      const events = traceparent ? decided.map((e) => ({ ...e, traceparent })) : decided;
      // Each event's JSON once: its size bounds the commit, and the commit is written from it.
      for (const event of events) {
        const text = eventJson(event);
        group.items.push({ event, text });
        group.bytes += text.length;
      }
      return { events, seq: await group.stored };
    },
  };
}

export type CreateCommits = ReturnType<typeof createCommits>;

const perStore = new WeakMap<EventStore, CreateCommits>();

/** The process's create commits on `store` (one per NATS connection). */
export function createCommitsOf(store: EventStore): CreateCommits {
  let c = perStore.get(store);
  if (!c) perStore.set(store, (c = createCommits(store)));
  return c;
}
