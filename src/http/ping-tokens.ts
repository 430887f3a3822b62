import type { Db } from '../db/connect.ts';

export interface PingTarget {
  org_id: string;
  id: string;
}

/** Tokens kept; one past this costs a Postgres read when it next pings. */
const CACHED_TOKENS = 100_000;
const TOKEN = /^pm_[0-9a-z]{32}$/;

/**
 * Which monitor a ping token names, read from Postgres once and then kept: a token is
 * given at creation and never changes, so the only way an entry goes stale is the
 * monitor's deletion, which the ping's own decision finds (it loads the monitor from
 * the log) and answers 404; the caller then forgets the token. A miss is not kept, so
 * a monitor whose row is not projected yet is found on the next ping.
 */
export function createPingTokens(db: Db) {
  const known = new Map<string, PingTarget>();
  return {
    async find(token: string): Promise<PingTarget | undefined> {
      if (!TOKEN.test(token)) return undefined;
      const hit = known.get(token);
      if (hit) return hit;
      const row = await db.selectFrom('monitors').select(['id', 'org_id']).where('token', '=', token).executeTakeFirst();
      if (!row) return undefined;
      if (known.size >= CACHED_TOKENS) known.delete(known.keys().next().value!);
      known.set(token, row);
      return row;
    },
    forget(token: string): void {
      known.delete(token);
    },
  };
}
