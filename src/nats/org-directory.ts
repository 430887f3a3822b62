import { SUBJECTS } from '../../streams/subjects.ts';
import type { Organization, OrganizationEvent } from '../commands/organization/types.ts';
import type { ApiKey, ApiKeyEvent } from '../commands/api-key/types.ts';
import type { EventStore } from '../commands/store.ts';
import { decodeJson } from '../lib/json.ts';
import { eventsOf } from '../commands/commit.ts';
import { onConnectionGap, type Nats } from './connection.ts';

/**
 * Organizations and API keys as this process needs them on hot paths (auth, rate
 * limits, signing). Read from the aggregate's last event on first use, then kept
 * current by a core subscription to the same subjects the events are published on.
 */
export function createDirectory(nats: Nats, store: EventStore) {
  const orgs = new Map<string, Organization>();
  const keys = new Map<string, ApiKey | null>();
  // Ping keys of the organizations whose events this process has seen (a key that was
  // rotated away stays here; `organization()` says whose it is now).
  const pingKeys = new Map<string, string>();
  const keep = (org: Organization) => {
    orgs.set(org.id, org);
    if (org.ping_key) pingKeys.set(org.ping_key, org.id);
  };
  const orgSub = nats.nc.subscribe('evt.*.org', {
    callback: (_err, msg) => {
      // A message that is not a well-formed event is no one's organization (the readers record it).
      try {
        keep(eventsOf<OrganizationEvent>(decodeJson<unknown>(msg.data))[0]!.data.organization);
      } catch { /* ignored */ }
    },
  });
  const keySub = nats.nc.subscribe('evt.apikey.*', {
    callback: (_err, msg) => {
      try {
        const e = eventsOf<ApiKeyEvent>(decodeJson<unknown>(msg.data))[0]!;
        keys.set(e.data.key.public_id, e.data.key);
      } catch { /* ignored, as above */ }
    },
  });
  onConnectionGap(nats, () => {
    orgs.clear();
    keys.clear();
    pingKeys.clear();
  });
  return {
    /** Our own writes update the cache at once instead of waiting for the subscription. */
    remember(org: Organization): void {
      keep(org);
    },
    /** The organization whose event with this ping key this process saw, if any (check it is still its key). */
    organizationOfPingKey(pingKey: string): string | undefined {
      return pingKeys.get(pingKey);
    },
    /** The organization as this process holds it, without a read (undefined: not held). */
    known(orgId: string): Organization | undefined {
      return orgs.get(orgId);
    },
    async organization(orgId: string): Promise<Organization | null> {
      const cached = orgs.get(orgId);
      if (cached) return cached;
      const last = await store.last<OrganizationEvent>(SUBJECTS.org(orgId));
      if (!last) return null;
      const org = orgs.get(orgId) ?? last.event.data.organization;
      keep(org);
      return org;
    },
    async apiKey(publicId: string): Promise<ApiKey | null> {
      if (keys.has(publicId)) return keys.get(publicId)!;
      const last = await store.last<ApiKeyEvent>(SUBJECTS.apiKey(publicId));
      const key = keys.get(publicId) ?? last?.event.data.key ?? null;
      // Unknown keys are not cached: a flood of random keys must not grow memory.
      if (key) keys.set(publicId, key);
      return key;
    },
    close() {
      orgSub.unsubscribe();
      keySub.unsubscribe();
    },
  };
}

export type Directory = ReturnType<typeof createDirectory>;
