import { SUBJECTS } from '../../streams/definitions.ts';
import type { Organization, OrganizationEvent } from '../commands/organization/types.ts';
import type { ApiKey, ApiKeyEvent } from '../commands/api-key/types.ts';
import type { EventStore } from '../events/store.ts';
import { decodeJson } from '../lib/json.ts';
import { onConnectionGap, type Nats } from './connection.ts';

/**
 * Organizations and API keys as this process needs them on hot paths (auth, rate
 * limits, signing). Read from the aggregate's last event on first use, then kept
 * current by a core subscription to the same subjects the events are published on.
 */
export function createDirectory(nats: Nats, store: EventStore) {
  const orgs = new Map<string, Organization>();
  const keys = new Map<string, ApiKey | null>();
  const orgSub = nats.nc.subscribe('evt.*.org', {
    callback: (_err, msg) => {
      // A message that is not a well-formed event is no one's organization (the readers record it).
      try {
        const e = decodeJson<OrganizationEvent>(msg.data);
        orgs.set(e.data.organization.id, e.data.organization);
      } catch { /* ignored */ }
    },
  });
  const keySub = nats.nc.subscribe('evt.apikey.*', {
    callback: (_err, msg) => {
      try {
        const e = decodeJson<ApiKeyEvent>(msg.data);
        keys.set(e.data.key.public_id, e.data.key);
      } catch { /* ignored, as above */ }
    },
  });
  onConnectionGap(nats, () => {
    orgs.clear();
    keys.clear();
  });
  return {
    /** Our own writes update the cache at once instead of waiting for the subscription. */
    remember(org: Organization): void {
      orgs.set(org.id, org);
    },
    async organization(orgId: string): Promise<Organization | null> {
      const cached = orgs.get(orgId);
      if (cached) return cached;
      const last = await store.last<OrganizationEvent>(SUBJECTS.org(orgId));
      if (!last) return null;
      const org = orgs.get(orgId) ?? last.event.data.organization;
      orgs.set(orgId, org);
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
