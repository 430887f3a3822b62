import { SUBJECTS } from '../../streams/subjects.ts';
import { evolveEndpoint } from '../commands/endpoint/decide.ts';
import type { Endpoint, EndpointEvent } from '../commands/endpoint/types.ts';
import type { Db } from '../db/connect.ts';
import type { EventStore } from '../commands/store.ts';
import { decodeJson } from '../lib/json.ts';
import { eventsOf } from '../commands/commit.ts';
import { onConnectionGap, type Nats } from '../nats/connection.ts';

export const SLUG_PATTERN = /^ep_[0-9a-z]{32}$/;

/**
 * Endpoints as the inbound hot path needs them: read once from the aggregate's last
 * event, then kept current by a core subscription to the endpoint subjects (and by
 * this process's own writes at once). A slug is found through the read model the
 * first time (the create answered only after it was projected).
 */
export function createEndpointDirectory(nats: Nats, store: EventStore, db: Db | null) {
  const byId = new Map<string, Endpoint | null>();
  const slugs = new Map<string, { org_id: string; id: string }>();

  const learn = (id: string, endpoint: Endpoint | null) => {
    byId.set(id, endpoint);
    if (endpoint) slugs.set(endpoint.slug, { org_id: endpoint.org_id, id });
  };
  const sub = nats.nc.subscribe('evt.*.endpoint.*', {
    callback: (_err, msg) => {
      // A message that is not a well-formed event teaches nothing (the log readers record it).
      try {
        const [e] = eventsOf<EndpointEvent>(decodeJson<unknown>(msg.data));
        learn(e!.data.endpoint.id, evolveEndpoint(null, e!));
      } catch { /* ignored */ }
    },
  });
  onConnectionGap(nats, () => {
    byId.clear();
    slugs.clear();
  });

  /** The endpoint as this process knows it, without waiting (null: deleted, or not the organization's); undefined when not known yet (`get` reads it). */
  function cachedEndpoint(orgId: string, id: string): Endpoint | null | undefined {
    if (!byId.has(id)) return undefined;
    const cached = byId.get(id)!;
    return cached && cached.org_id === orgId ? cached : null;
  }

  async function byEndpointId(orgId: string, id: string): Promise<Endpoint | null> {
    const cached = cachedEndpoint(orgId, id);
    if (cached !== undefined) return cached;
    const last = await store.last<EndpointEvent>(SUBJECTS.endpoint(orgId, id));
    const endpoint = last ? evolveEndpoint(null, last.event) : null;
    // The subscription may have delivered something newer while we read.
    if (!byId.has(id) && endpoint) learn(id, endpoint);
    return byId.get(id) ?? endpoint;
  }

  return {
    /**
     * The endpoint of `slug` as this process knows it, without waiting: null when it
     * cannot be one (not a slug, deleted, or another endpoint's slug now), undefined when
     * it is not known here yet (`bySlug` finds it).
     */
    known(slug: string): Endpoint | null | undefined {
      if (!SLUG_PATTERN.test(slug)) return null;
      const where = slugs.get(slug);
      const endpoint = where && cachedEndpoint(where.org_id, where.id);
      return endpoint ? (endpoint.slug === slug ? endpoint : null) : endpoint;
    },
    remember(endpoint: Endpoint | null, id: string): void {
      learn(id, endpoint);
    },
    get: byEndpointId,
    cached: cachedEndpoint,
    async bySlug(slug: string): Promise<Endpoint | null> {
      if (!SLUG_PATTERN.test(slug)) return null;
      let where = slugs.get(slug);
      if (!where && db) {
        const row = await db.selectFrom('endpoints').select(['id', 'org_id']).where('slug', '=', slug).executeTakeFirst();
        if (row) where = { org_id: row.org_id, id: row.id };
      }
      if (!where) return null;
      const endpoint = await byEndpointId(where.org_id, where.id);
      return endpoint && endpoint.slug === slug ? endpoint : null;
    },
    close() {
      sub.unsubscribe();
    },
  };
}

export type EndpointDirectory = ReturnType<typeof createEndpointDirectory>;
