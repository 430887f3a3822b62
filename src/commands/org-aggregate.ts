import type { Envelope } from '../events/envelope.ts';
import { ConcurrencyError } from '../events/store.ts';
import { notFound } from '../lib/errors.ts';
import { ID_PATTERN } from '../lib/ids.ts';
import type { CommandMeta } from './meta.ts';
import { commandMeta, execute, type CommandDeps, type Decided } from './execute.ts';
import { reserveSlot, type PlanLimit, type QuotaKind } from './quota.ts';

/**
 * An aggregate that belongs to one organization and is addressed by a prefixed id
 * (schedules, monitors, endpoints): its subject, its decider and what "not found"
 * says. An id of another shape, or another organization's aggregate, is not found
 * (never forbidden: its existence is not revealed).
 */
export function orgAggregate<S extends { id: string; org_id: string }, C, E extends Envelope>(def: {
  kind: QuotaKind;
  idPrefix: string;
  notFound: string;
  subject: (orgId: string, id: string) => string;
  decide: (command: C, state: S | null, meta: CommandMeta) => E;
  evolve: (state: S | null, event: E) => S | null;
}) {
  const live = (deps: CommandDeps, orgId: string) => async (id: string): Promise<boolean | null> => {
    const last = await deps.store.last<E>(def.subject(orgId, id));
    return last ? def.evolve(null, last.event) !== null : null;
  };
  return {
    run(deps: CommandDeps, orgId: string, id: string, command: C): Promise<Decided<S, E>> {
      if (!ID_PATTERN.test(id) || !id.startsWith(def.idPrefix)) throw notFound(def.notFound);
      return execute(deps, def.subject(orgId, id), command, def.decide, (s, e) => {
        const next = def.evolve(s, e);
        return next && next.org_id === orgId ? next : null;
      });
    },
    /**
     * Decides the create, takes a place of the plan's count (`plan.live` = the read
     * model's ids), then appends. `onceId` (derived from an Idempotency-Key) makes it
     * once-only: if that aggregate is already stored (the same request ran before a
     * crash) it is the answer, and nothing is reserved or appended again.
     */
    async create(deps: CommandDeps, orgId: string, command: C, plan: PlanLimit, onceId?: string): Promise<Decided<S, E>> {
      const stored = async (): Promise<Decided<S, E> | null> => {
        const last = onceId ? await deps.store.last<E>(def.subject(orgId, onceId)) : null;
        const state = last && def.evolve(null, last.event);
        return last && state && state.org_id === orgId ? { event: last.event, state, seq: last.seq } : null;
      };
      const before = await stored();
      if (before) return before;
      const meta = commandMeta(deps.clock);
      const prefix = def.idPrefix.replace(/_$/, '');
      const event = def.decide(command, null, onceId ? { ...meta, newId: (p) => (p === prefix ? onceId : meta.newId(p)) } : meta);
      const state = def.evolve(null, event)!;
      await reserveSlot(deps, orgId, def.kind, plan, state.id, live(deps, orgId));
      try {
        return { event, state, seq: await deps.store.append(def.subject(orgId, state.id), event, 0) };
      } catch (err) {
        // Stored meanwhile by the same request's first run (a takeover of its key).
        const raced = onceId && err instanceof ConcurrencyError ? await stored() : null;
        if (raced) return raced;
        throw err;
      }
    },
  };
}
