import { PING_KEY_PATTERN } from '../commands/organization/handlers.ts';
import type { SlugOwner } from '../commands/monitor/handlers.ts';
import { SLUG_PATTERN } from '../commands/monitor/types.ts';
import type { Db } from '../db/connect.ts';
import { boundedMap as bounded } from '../lib/bounded-map.ts';
import type { Directory } from '../nats/org-directory.ts';

export interface PingTarget {
  org_id: string;
  id: string;
}

/** Tokens (and names) kept; one past this costs a Postgres read when it next pings. */
const CACHED_TOKENS = 100_000;
const TOKEN = /^pm_[0-9a-z]{32}$/;
const boundedMap = <V>() => bounded<V>(CACHED_TOKENS);

/** The read model's answer to "which monitor of this organization has this slug". */
export const slugOwner = (db: Db): SlugOwner => async (orgId, slug) =>
  (await db.selectFrom('monitors').select('id').where('org_id', '=', orgId).where('slug', '=', slug).orderBy('created_at').executeTakeFirst())?.id ?? null;

/**
 * Which monitor a ping URL names, read from Postgres once and then kept.
 *
 * By token: a token is given at creation and never changes, so the only way an entry
 * goes stale is the monitor's deletion, which the ping's own decision finds (it loads
 * the monitor from the log) and answers 404; the caller then forgets the token. A
 * miss is not kept, so a monitor whose row is not projected yet is found on the next
 * ping.
 *
 * By name (`<ping_key>/<slug>`): the key's organization comes from the directory
 * (every organization event seen live) or the read model, and the key must still be
 * that organization's, checked against its event-carried state (the directory follows
 * every change live), so a rotated key stops working at once; a slug that moved is
 * found by the ping's decision (it compares the monitor's slug), and the caller
 * forgets the name.
 */
export type PingTokens = ReturnType<typeof createPingTokens>;

export function createPingTokens(db: Db, directory: Pick<Directory, 'organization' | 'organizationOfPingKey'>) {
  const byToken = boundedMap<PingTarget>();
  const orgOfKey = boundedMap<string>();
  const byName = boundedMap<string>();
  return {
    async find(token: string): Promise<PingTarget | undefined> {
      if (!TOKEN.test(token)) return undefined;
      const hit = byToken.get(token);
      if (hit) return hit;
      const row = await db.selectFrom('monitors').select(['id', 'org_id']).where('token', '=', token).executeTakeFirst();
      if (!row) return undefined;
      byToken.set(token, row);
      return row;
    },
    /** A monitor this process just created: its first ping needs no read. */
    remember(token: string, target: PingTarget): void {
      byToken.set(token, target);
    },
    forget(token: string): void {
      byToken.delete(token);
    },
    /** The organization whose ping key this is now, if any. */
    async organizationOf(pingKey: string): Promise<string | undefined> {
      if (!PING_KEY_PATTERN.test(pingKey)) return undefined;
      let orgId = orgOfKey.get(pingKey) ?? directory.organizationOfPingKey(pingKey);
      if (!orgId) {
        orgId = (await db.selectFrom('organizations').select('id').where('ping_key', '=', pingKey).executeTakeFirst())?.id;
        if (!orgId) return undefined;
        orgOfKey.set(pingKey, orgId);
      }
      if ((await directory.organization(orgId))?.ping_key === pingKey) return orgId;
      orgOfKey.delete(pingKey);
      return undefined;
    },
    /** The monitor with this slug in the organization, if any (`fresh`: ask Postgres, not the cache). */
    async findByName(orgId: string, slug: string, fresh = false): Promise<PingTarget | undefined> {
      if (!SLUG_PATTERN.test(slug)) return undefined;
      const name = `${orgId}/${slug}`;
      const hit = fresh ? undefined : byName.get(name);
      if (hit) return { org_id: orgId, id: hit };
      const id = await slugOwner(db)(orgId, slug);
      if (!id) return void byName.delete(name);
      byName.set(name, id);
      return { org_id: orgId, id };
    },
    rememberName(orgId: string, slug: string, id: string): void {
      byName.set(`${orgId}/${slug}`, id);
    },
    forgetName(orgId: string, slug: string): void {
      byName.delete(`${orgId}/${slug}`);
    },
  };
}
