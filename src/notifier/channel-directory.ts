import { SUBJECTS } from '../../streams/subjects.ts';
import { loadChannels } from '../commands/channel/handlers.ts';
import type { Channel, ChannelEvent, ChannelSet } from '../commands/channel/types.ts';
import type { EventStore } from '../commands/store.ts';
import { decodeJson } from '../lib/json.ts';
import { onConnectionGap, type Nats } from '../nats/connection.ts';

/**
 * Organizations' notification channels as the notifier needs them on every
 * transition: read once per organization from the set's last event (one direct get),
 * then kept current by a core subscription to the sets' subjects. Every event carries
 * the whole set and its `version`, so of two copies (one read, one heard) the higher
 * version wins, whichever arrived first.
 */
export function createChannelDirectory(nats: Nats, store: EventStore) {
  const sets = new Map<string, ChannelSet | null>();
  const keep = (orgId: string, set: ChannelSet | null) => {
    const known = sets.get(orgId);
    if (!known || (set && set.version > known.version)) sets.set(orgId, set);
  };
  const sub = nats.nc.subscribe(SUBJECTS.allChannels, {
    callback: (_err, msg) => {
      // A message that is not a well-formed event is no one's channels (the log readers record it).
      try {
        const e = decodeJson<ChannelEvent>(msg.data);
        keep(e.org_id, e.data.set);
      } catch { /* ignored */ }
    },
  });
  onConnectionGap(nats, () => sets.clear());
  return {
    /** The organization's channels as held, without a read (undefined: not read yet). */
    known(orgId: string): Channel[] | undefined {
      return sets.has(orgId) ? (sets.get(orgId)?.channels ?? []) : undefined;
    },
    async channels(orgId: string): Promise<Channel[]> {
      if (!sets.has(orgId)) keep(orgId, await loadChannels(store, orgId));
      return sets.get(orgId)?.channels ?? [];
    },
    close() {
      sub.unsubscribe();
    },
  };
}

export type ChannelDirectory = ReturnType<typeof createChannelDirectory>;
