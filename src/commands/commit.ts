import type { Envelope } from './envelope.ts';
import { storedEvent, upcast } from './upcast.ts';

/**
 * A commit: one stored message holding an ordered list of events, each with its own
 * deterministic id. The events of one commit are written, read and deduplicated
 * together: a reader hands them on in order, all with the message's stream sequence
 * (`StoredEvent.index` tells them apart), and a checkpoint passes all of them or none.
 * A message holding one plain event (every message written before commits existed, and
 * the low-volume aggregates' guarded appends) reads as a list of one.
 */
export interface CommitMessage<E extends Envelope = Envelope> {
  type: 'Commit';
  /** Deterministic (the writer's): `Nats-Msg-Id`, so a retried publish is stored once. */
  id: string;
  at: string;
  /** A partition owner's commit: the lowest EVENTS position a takeover must read from. */
  from?: number;
  events: E[];
}

/**
 * The bytes of events a writer puts in one commit at most (the EVENTS stream takes
 * messages up to 4 MiB): the API's create commits and a bulk job's groups close before
 * this, so one commit never meets the stream's limit.
 */
export const COMMIT_MAX_BYTES = 2 * 1024 * 1024;

/** A commit of `events`, each with its type's version (`storedEvent`). */
export function commitMessage<E extends Envelope>(id: string, events: E[], at: Date): CommitMessage<E> {
  if (events.length === 0) throw new Error('a commit holds at least one event');
  return { type: 'Commit', id, at: at.toISOString(), events: events.map(storedEvent) };
}

/**
 * A commit's JSON with its events given as their JSON texts (what `JSON.stringify(commit)`
 * gives), as UTF-8 bytes: each text is written once into the message's buffer, with no
 * joined copy of the whole commit (a bulk job's group is a megabyte of text).
 */
export function commitBytes(commit: CommitMessage, eventTexts: readonly string[]): Buffer {
  const { events, ...head } = commit;
  const open = `${JSON.stringify(head).slice(0, -1)},"events":[`;
  let size = Buffer.byteLength(open) + 2 + Math.max(0, eventTexts.length - 1);
  for (const t of eventTexts) size += Buffer.byteLength(t);
  const out = Buffer.allocUnsafe(size);
  let at = out.write(open);
  for (let i = 0; i < eventTexts.length; i++) {
    if (i > 0) out[at++] = 0x2c; // ,
    at += out.write(eventTexts[i]!, at);
  }
  out[at++] = 0x5d; // ]
  out[at++] = 0x7d; // }
  return out;
}

function isCommit(message: unknown): message is CommitMessage {
  return !!message && typeof message === 'object' && (message as { type?: unknown }).type === 'Commit' && Array.isArray((message as { events?: unknown }).events);
}

/**
 * The events a stored message holds, in order: a commit's list, or the one event, each
 * in today's shape (`upcast`): the decoding seam every reader of EVENTS goes through.
 */
export function eventsOf<E extends Envelope>(message: unknown): E[] {
  if (isCommit(message)) {
    const events = message.events;
    for (let i = 0; i < events.length; i++) events[i] = upcast(events[i]!);
    return events as E[];
  }
  if (!message || typeof message !== 'object' || typeof (message as { type?: unknown }).type !== 'string') {
    throw new Error('not an event: a message without a type');
  }
  return [upcast(message as Envelope) as unknown as E];
}
