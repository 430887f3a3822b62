import type { Envelope } from './envelope.ts';
import { ConcurrencyError } from './store.ts';
import { notFound } from '../lib/errors.ts';
import { ID_PATTERN } from '../lib/ids.ts';
import { appendEvents, commandMeta, execute, fold, type CommandDeps, type Decide, type Decided, type Evolve } from './execute.ts';
import type { Heads } from './heads.ts';
import type { PlanLimit } from './plan-rules.ts';
import { planLimitedCreate, reserveSlot, type QuotaKind } from './quota.ts';

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
  decide: Decide<S, C, E>;
  evolve: Evolve<S, E>;
  /** Remember this process's appends, so the next command decides without a load (`createHeads`). */
  heads?: Heads<S>;
}) {
  const scoped = (orgId: string): Evolve<S, E> => (s, e) => {
    const next = def.evolve(s, e);
    return next && next.org_id === orgId ? next : null;
  };
  const live = (deps: CommandDeps, orgId: string) => async (id: string): Promise<boolean | null> => {
    const last = await deps.store.last<E>(def.subject(orgId, id));
    return last ? def.evolve(null, last.event) !== null : null;
  };
  return {
    run(deps: CommandDeps, orgId: string, id: string, command: C): Promise<Decided<S, E>> {
      if (!ID_PATTERN.test(id) || !id.startsWith(def.idPrefix)) throw notFound(def.notFound);
      return execute(deps, def.subject(orgId, id), command, def.decide, scoped(orgId), def.heads ? { heads: def.heads } : {});
    },
    /**
     * Decides the create, takes a place of the plan's count (`plan.live` = the read
     * model's ids), then appends. `onceId` (derived from an Idempotency-Key) makes it
     * once-only: if that aggregate is already stored (the same request ran before a
     * crash) it is the answer, and nothing is reserved or appended again.
     */
    create(deps: CommandDeps, orgId: string, command: C, plan: PlanLimit, onceId?: string): Promise<Decided<S, E>> {
      const stored = async (): Promise<Decided<S, E> | null> => {
        const last = onceId ? await deps.store.last<E>(def.subject(orgId, onceId)) : null;
        const state = last && scoped(orgId)(null, last.event);
        return last && state ? { events: [], state, seq: last.seq } : null;
      };
      return planLimitedCreate(deps, orgId, def.kind, plan, async () => {
        const before = await stored();
        if (before) return before;
        const meta = commandMeta(deps.clock);
        const prefix = def.idPrefix.replace(/_$/, '');
        const events = def.decide(command, null, onceId ? { ...meta, newId: (p) => (p === prefix ? onceId : meta.newId(p)) } : meta);
        const state = fold(def.evolve, null, events);
        if (!state) throw new Error(`a create of a ${def.kind} decided no ${def.kind}`);
        await reserveSlot(deps, orgId, def.kind, plan, state.id, live(deps, orgId));
        try {
          const seq = await appendEvents(deps.store, def.subject(orgId, state.id), events, 0);
          def.heads?.set(deps.store, def.subject(orgId, state.id), state, seq);
          return { events, state, seq };
        } catch (err) {
          // Stored meanwhile by the same request's first run (a takeover of its key).
          const raced = onceId && err instanceof ConcurrencyError ? await stored() : null;
          if (raced) return raced;
          throw err;
        }
      });
    },
  };
}
