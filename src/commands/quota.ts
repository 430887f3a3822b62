import type { Envelope } from './envelope.ts';
import { executeOnce, retryConflicts, type CommandDeps } from './execute.ts';
import type { CommandMeta } from './meta.ts';
import { overLimit, type LimitedKind, type PlanLimit } from './plan-rules.ts';

export type QuotaKind = LimitedKind;

export interface Reservation {
  id: string;
  at: string;
}

export type QuotaEvent = Envelope<'QuotaReserved', { kind: QuotaKind; reservations: Reservation[] }>;

export type QuotaCommand = {
  type: 'ReserveSlot';
  orgId: string;
  kind: QuotaKind;
  plan: PlanLimit;
  /** The resource taking the place. */
  id: string;
  /**
   * When the list is full: per reservation, whether its resource exists (true), was
   * deleted (false) or was never stored (null). Read after the load (`gather`).
   */
  liveness?: Record<string, boolean | null>;
};

export const quotaSubject = (orgId: string, kind: QuotaKind) => `evt.${orgId}.quota.${kind}`;

/** A reservation this young counts before its resource is stored: its create may be in flight. Older = a create that died. */
const IN_FLIGHT_MS = 30_000;
const EPOCH = new Date(0).toISOString();

export const evolveQuota = (_state: Reservation[] | null, event: QuotaEvent): Reservation[] => event.data.reservations;

/** The places taken: the reservations so far, plus the read model's ids not among them. */
function taken(state: Reservation[] | null, live: string[]): Reservation[] {
  const byId = new Map<string, Reservation>();
  for (const r of state ?? []) byId.set(r.id, r);
  for (const id of live) if (!byId.has(id)) byId.set(id, { id, at: EPOCH });
  return [...byId.values()];
}

const full = (list: Reservation[], plan: PlanLimit): boolean => plan.limit !== null && list.length >= plan.limit;

/**
 * One of the plan's places for `id`, or a 403. An unlimited plan reserves nothing.
 * When the list is full, the places of resources that are gone (deleted, or a
 * create that died after reserving) are freed before refusing; one whose
 * liveness is unknown counts.
 */
export function decideQuota(command: QuotaCommand, state: Reservation[] | null, meta: CommandMeta): QuotaEvent[] {
  const { plan, kind, liveness } = command;
  if (plan.limit === null) return [];
  let list = taken(state, plan.live);
  if (full(list, plan) && liveness) {
    list = list.filter((r) => {
      const live = liveness[r.id];
      return live === undefined || live === true || (live === null && Date.parse(r.at) > meta.nowMs - IN_FLIGHT_MS);
    });
  }
  if (full(list, plan)) throw overLimit(plan, kind);
  return [{ type: 'QuotaReserved', id: meta.eventId, at: meta.now, org_id: command.orgId, data: { kind, reservations: [...list, { id: command.id, at: meta.now }] } }];
}

/**
 * Takes one of the plan's places for `id` before the resource is created. The read
 * model alone lets concurrent creates all pass the count; here every create of the
 * organization appends to one quota subject guarded by its sequence, so they go one
 * at a time. Runs inside `planLimitedCreate`'s turn on that subject: a conflict
 * decides the whole create again.
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
  // Unlimited: nothing to reserve, and no need to read the subject to find that out.
  if (plan.limit === null) return;
  const gather = async (command: QuotaCommand, state: Reservation[] | null): Promise<QuotaCommand> => {
    const list = taken(state, plan.live);
    if (!full(list, plan)) return command;
    const checked = await Promise.all(list.map(async (r) => [r.id, await isLive(r.id)] as const));
    return { ...command, liveness: Object.fromEntries(checked) };
  };
  await executeOnce(deps, quotaSubject(orgId, kind), { type: 'ReserveSlot', orgId, kind, plan, id }, decideQuota, evolveQuota, { gather });
}

/**
 * A create that takes a place of the plan's count: every create of the organization
 * and kind appends to one quota subject, so they queue and retry on it like commands
 * on one aggregate. Unlimited plans never touch it and run in parallel.
 */
export function planLimitedCreate<T>(deps: CommandDeps, orgId: string, kind: QuotaKind, plan: PlanLimit, create: () => Promise<T>): Promise<T> {
  return plan.limit === null ? create() : retryConflicts(deps, quotaSubject(orgId, kind), create);
}
