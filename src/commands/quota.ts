import type { Envelope } from '../events/envelope.ts';
import { ConcurrencyError } from '../events/store.ts';
import { forbidden } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import type { CommandDeps } from './execute.ts';

export type QuotaKind = 'endpoint' | 'schedule' | 'monitor';

/** A plan's count limit as a create sees it: `live` = the ids the read model holds now. */
export interface PlanLimit {
  name: string;
  limit: number | null;
  live: string[];
}

interface Reservation {
  id: string;
  at: string;
}

export type QuotaEvent = Envelope<'QuotaReserved', { kind: QuotaKind; reservations: Reservation[] }>;

export const quotaSubject = (orgId: string, kind: QuotaKind) => `evt.${orgId}.quota.${kind}`;

/** A reservation this young counts before its resource is stored: its create may be in flight. Older = a create that died. */
const IN_FLIGHT_MS = 30_000;
const MAX_CONFLICT_RETRIES = 10;
const EPOCH = new Date(0).toISOString();

/**
 * Takes one of the plan's places for `id` before the resource is created. The read
 * model alone lets concurrent creates all pass the count; here every create of the
 * organization appends to one quota subject guarded by its sequence, so they go
 * one at a time. The list is the read model's ids plus the reservations not yet
 * projected; when it is full, entries whose resource is gone (deleted, or a create
 * that died after reserving) are dropped before refusing.
 */
export async function reserveSlot(
  deps: CommandDeps,
  orgId: string,
  kind: QuotaKind,
  plan: PlanLimit,
  id: string,
  /** true: exists; false: deleted; null: never stored (yet). */
  isLive: (id: string) => Promise<boolean | null>,
): Promise<void> {
  if (plan.limit === null) return;
  const subject = quotaSubject(orgId, kind);
  for (let attempt = 0; ; attempt++) {
    const last = await deps.store.last<QuotaEvent>(subject);
    const now = deps.clock.now();
    const byId = new Map<string, Reservation>();
    for (const r of last?.event.data.reservations ?? []) byId.set(r.id, r);
    for (const liveId of plan.live) if (!byId.has(liveId)) byId.set(liveId, { id: liveId, at: EPOCH });
    let list = [...byId.values()];
    if (list.length >= plan.limit) {
      const kept = await Promise.all(list.map(async (r) => {
        const live = await isLive(r.id);
        return live || (live === null && Date.parse(r.at) > now - IN_FLIGHT_MS) ? r : null;
      }));
      list = kept.filter((r): r is Reservation => r !== null);
    }
    if (list.length >= plan.limit) throw forbidden(`the ${plan.name} plan allows ${plan.limit} ${kind}s; delete one or upgrade to Pro`);
    const at = new Date(now).toISOString();
    const event: QuotaEvent = { type: 'QuotaReserved', id: newId('evt', now), at, org_id: orgId, data: { kind, reservations: [...list, { id, at }] } };
    try {
      await deps.store.append(subject, event, last?.seq ?? 0);
      return;
    } catch (err) {
      if (!(err instanceof ConcurrencyError) || attempt >= MAX_CONFLICT_RETRIES) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 4 * (attempt + 1)));
    }
  }
}
