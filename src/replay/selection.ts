import type { EventType, JetcronEvent } from '../commands/events.ts';
import { storedTypeNames } from '../commands/upcast.ts';

/**
 * Which events a replay hands its projection: from a sequence or a time on, of some
 * types, of one organization. The log is read from the start position; everything else
 * is a filter, and a message that cannot hold what is asked for is passed over before
 * it is decoded (a byte search, not a parse): a replay of one rare type reads the log
 * at the speed of the network, not of JSON.parse.
 */
export interface Selection {
  fromSeq?: number;
  /** Events decided at or after this time (their `at`); the read starts at the first message stored then. */
  since?: Date;
  types?: EventType[];
  org?: string;
}

/** What a replay remembers of its selection: a later run with other filters would mix two projections in one table. */
export function filterKey(s: Selection): string {
  return JSON.stringify({ types: s.types ? [...s.types].sort() : null, org: s.org ?? null });
}

/** Whether an event (decoded, upcast) is selected. */
export function eventFilter(s: Selection): ((e: JetcronEvent) => boolean) | undefined {
  const types = s.types && new Set<string>(s.types);
  const since = s.since?.toISOString();
  if (!types && !s.org && !since) return undefined;
  // ISO 8601 times of one format compare as text.
  return (e) => (!types || types.has(e.type)) && (!s.org || e.org_id === s.org) && (!since || e.at >= since);
}

/**
 * Whether a stored message may hold a selected event, from its bytes: every appender
 * writes `JSON.stringify` text, where an event's type is `"type":"<T>"` and its
 * organization `"org_id":"<O>"` to the byte. A false "maybe" costs a decode; there is
 * no false "no". Undefined when every message must be decoded anyway.
 */
export function messagePrefilter(s: Selection): ((data: Uint8Array) => boolean) | undefined {
  const typeNeedles = s.types?.flatMap(storedTypeNames).map((t) => Buffer.from(`"type":${JSON.stringify(t)}`));
  const orgNeedle = s.org === undefined ? undefined : Buffer.from(`"org_id":${JSON.stringify(s.org)}`);
  if (!typeNeedles && !orgNeedle) return undefined;
  return (data) => {
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    return (!typeNeedles || typeNeedles.some((n) => bytes.includes(n))) && (!orgNeedle || bytes.includes(orgNeedle));
  };
}
