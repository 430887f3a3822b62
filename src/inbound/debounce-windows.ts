import { SUBJECTS } from '../../streams/subjects.ts';
import type { InboundDebounceEvent, InboundDebounceWindow } from '../commands/inbound-event/types.ts';
import type { EventStore } from '../commands/store.ts';
import { subjectToken } from '../lib/subject-token.ts';

/** Cached windows kept per router: enough for many live keys, bounded against a key per request. */
const CACHE_LIMIT = 10_000;

interface Known {
  window: InboundDebounceWindow;
  /** Its event's sequence on the window subject: the expected last sequence of the next open. */
  seq: number;
}

/**
 * The debounce windows of endpoints' transform() keys, for the router (their only
 * writer, one lease). A window is an `InboundDebounceOpened` on its own subject in
 * EVENTS, so a router that starts again finds the windows still open; while it runs,
 * the ones it read or opened are kept in memory.
 */
export function createDebounceWindows(store: EventStore) {
  const known = new Map<string, Known | null>();
  const subjectOf = (orgId: string, endpointId: string, key: string) =>
    SUBJECTS.inboundDebounce(orgId, endpointId, subjectToken(key));

  function remember(subject: string, value: Known | null): void {
    if (known.size >= CACHE_LIMIT && !known.has(subject)) known.delete(known.keys().next().value!);
    known.set(subject, value);
  }

  async function read(subject: string): Promise<Known | null> {
    if (known.has(subject)) return known.get(subject)!;
    const last = await store.last<InboundDebounceEvent>(subject);
    const value = last ? { window: last.event.data.window, seq: last.seq } : null;
    remember(subject, value);
    return value;
  }

  return {
    /** The key's latest window (open or ended), or null when it never had one. */
    async latest(orgId: string, endpointId: string, key: string): Promise<InboundDebounceWindow | null> {
      return (await read(subjectOf(orgId, endpointId, key)))?.window ?? null;
    },
    /** Records a new window for the key; the last one read must still be its latest. */
    async open(orgId: string, window: InboundDebounceWindow, at: string): Promise<void> {
      const subject = subjectOf(orgId, window.endpoint_id, window.debounce_key);
      const before = await read(subject);
      const event: InboundDebounceEvent = { type: 'InboundDebounceOpened', id: `${window.event_id}.debounce`, at, org_id: orgId, data: { window } };
      const seq = await store.append(subject, event, before?.seq ?? 0);
      remember(subject, { window, seq });
    },
    /** Forget everything (a new lease: another router may have written since). */
    clear(): void {
      known.clear();
    },
  };
}

export type DebounceWindows = ReturnType<typeof createDebounceWindows>;
