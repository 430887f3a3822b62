import type { StoredMsg } from '@nats-io/jetstream';
import type { Nats } from './connection.ts';

/**
 * The last message of every subject of `stream` that `filter` matches: the subjects
 * from the stream's state, then one direct get each. For a handful of subjects (one
 * source's timers, the flow-control keys); a failed call rejects (unknown, not absent).
 */
export async function lastOfEach(nats: Nats, stream: string, filter: string): Promise<StoredMsg[]> {
  const info = await nats.jsm.streams.info(stream, { subjects_filter: filter });
  const subjects = Object.keys(info?.state.subjects ?? {});
  const messages = await Promise.all(subjects.map((subject) => nats.jsm.direct.getMessage(stream, { last_by_subj: subject })));
  return messages.filter((m): m is StoredMsg => m !== null);
}
