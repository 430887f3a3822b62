import type { Envelope } from '../events/envelope.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { ApiError } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import { KeyedMutex } from '../lib/keyed-mutex.ts';
import type { CommandMeta } from './meta.ts';
import { quotaSubject, type PlanLimit, type QuotaKind } from './quota.ts';

export interface CommandDeps {
  store: EventStore;
  clock: Clock;
}

export function commandMeta(clock: Clock): CommandMeta {
  const nowMs = clock.now();
  return {
    nowMs,
    now: new Date(nowMs).toISOString(),
    eventId: newId('evt', nowMs),
    scaleWait: clock.wait,
    newId: (prefix) => newId(prefix, nowMs),
  };
}

export interface Decided<S, E> {
  event: E;
  state: S | null;
  seq: number;
}

/** How long a command keeps deciding again after conflicts (queueing included) before it answers 503. */
export const CONFLICT_BUDGET_MS = 5_000;
const FIRST_BACKOFF_MS = 2;
const MAX_BACKOFF_MS = 250;

// One queue set per store, i.e. per NATS connection: the writers it serializes are
// the ones that would otherwise collide with each other. Writers elsewhere (another
// process, the scheduler's deadline and tick appends) are met by the guarded append.
const queues = new WeakMap<EventStore, KeyedMutex>();

function queuesOf(store: EventStore): KeyedMutex {
  let q = queues.get(store);
  if (!q) queues.set(store, (q = new KeyedMutex()));
  return q;
}

/** Subjects with commands running or waiting in this process (0 when idle). */
export const queuedSubjects = (store: EventStore): number => queues.get(store)?.size ?? 0;

const contended = () => new ApiError(503, 'Too many concurrent changes to this resource; retry', null, { 'Retry-After': '1' });

/**
 * Runs `attempt` (load → decide → guarded append) for one aggregate until it does
 * not conflict. Attempts on one key in this process run one after another, so they
 * do not conflict with each other at all; a conflict with another process is met
 * by deciding again after a jittered, growing pause. The conflict count is not the
 * limit, time is: `budgetMs` after the call, queueing included, the caller gets a
 * 503 with Retry-After, never the ConcurrencyError (a 500). A command whose turn
 * comes after its budget is spent is not tried: the queue sheds load instead of
 * growing while the store is slow.
 */
export function retryConflicts<T>(deps: Pick<CommandDeps, 'store'>, key: string, attempt: () => Promise<T>, budgetMs = CONFLICT_BUDGET_MS): Promise<T> {
  const deadline = Date.now() + budgetMs;
  return queuesOf(deps.store).run(key, async () => {
    for (let conflicts = 0; ; conflicts++) {
      // The key names an organization and an aggregate: not for a ping_url caller to read.
      if (Date.now() > deadline) throw contended();
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof ConcurrencyError)) throw err;
        // Full jitter: writers that collided pick apart instead of colliding again in step.
        const pause = Math.random() * Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** conflicts);
        if (Date.now() + pause > deadline) throw contended();
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  });
}

/**
 * Load → decide → guarded append. The aggregate's state is carried by its last
 * event; a concurrent writer makes the append fail and we decide again on the
 * fresh state (see `retryConflicts`).
 */
export function execute<S, C, E extends Envelope>(
  deps: CommandDeps,
  subject: string,
  command: C,
  decide: (command: C, state: S | null, meta: CommandMeta) => E,
  evolve: (state: S | null, event: E) => S | null,
): Promise<Decided<S, E>> {
  return retryConflicts(deps, subject, async () => {
    const last = await deps.store.last<E>(subject);
    const state = last ? evolve(null, last.event) : null;
    const event = decide(command, state, commandMeta(deps.clock));
    const seq = await deps.store.append(subject, event, last?.seq ?? 0);
    return { event, state: evolve(state, event), seq };
  });
}

/**
 * A create that takes a place of the plan's count: every create of the organization
 * and kind appends to one quota subject, so they queue and retry on it like commands
 * on one aggregate. Unlimited plans never touch it and run in parallel.
 */
export function planLimitedCreate<T>(deps: CommandDeps, orgId: string, kind: QuotaKind, plan: PlanLimit, create: () => Promise<T>): Promise<T> {
  return plan.limit === null ? create() : retryConflicts(deps, quotaSubject(orgId, kind), create);
}
