import AsyncLock from 'async-lock';
import type { Envelope } from './envelope.ts';
import { ConcurrencyError, type EventStore } from './store.ts';
import type { Clock } from '../lib/clock.ts';
import { ApiError } from '../lib/errors.ts';
import { newId } from '../lib/ids.ts';
import type { Heads } from './heads.ts';
import type { MonitorOwners } from './monitor/owners.ts';
import type { CommandMeta } from './meta.ts';

export interface CommandDeps {
  store: EventStore;
  clock: Clock;
  /** Set when monitor partition owners decide monitors' commands (`src/owners/monitor-owner.ts`). */
  monitorOwners?: MonitorOwners;
}

/** `nowMs`: the moment decided at, when the caller has already read the clock for it. */
export function commandMeta(clock: Clock, nowMs = clock.now()): CommandMeta {
  let eventId: string | undefined;
  return {
    nowMs,
    now: new Date(nowMs).toISOString(),
    // Made when a decision names its event by it: the execution's decisions (an attempt's
    // result, on the owners' hot path) name theirs after the execution and never ask.
    get eventId() {
      return (eventId ??= newId('evt', nowMs));
    },
    scaleWait: clock.wait,
    newId: (prefix) => newId(prefix, nowMs),
  };
}

/** A pure decision: the events the command makes of the state, in order; none = nothing to do. */
export type Decide<S, C, E> = (command: C, state: S | null, meta: CommandMeta) => E[];
/** The state after one event (each event carries its aggregate, so most ignore `state`). */
export type Evolve<S, E> = (state: S | null, event: E) => S | null;

export interface Decided<S, E> {
  /** What was appended, in order; empty when the decision was to do nothing. */
  events: E[];
  /** The state after those events (the loaded state when there were none). */
  state: S | null;
  /** The stream sequence of the last event appended, or of the state loaded (0: none). */
  seq: number;
}

export interface ExecuteOptions<S, C> {
  /**
   * Reads what the decision needs from other subjects, after each load (so a retry
   * reads it again): the answer travels in the command, and `decide` stays pure.
   */
  gather?: (command: C, state: S | null, meta: CommandMeta) => Promise<C>;
  /** What a command answers once its conflict budget is spent; default a 503 with Retry-After. */
  contended?: () => Error;
  /** This process's last appends to the aggregate's subjects: decide from one instead of loading (see `createHeads`). */
  heads?: Heads<S>;
  /**
   * The aggregate's state when its subject holds nothing yet, from where it was made (a
   * task created in a batch's commit); null when it does not exist. The first append to
   * the subject still expects it empty.
   */
  initial?: () => Promise<S | null>;
  /** The decision's events go in one commit (one message) rather than one message each. */
  commit?: boolean;
}

/** How long a command keeps deciding again after conflicts (queueing included) before it answers 503. */
export const CONFLICT_BUDGET_MS = 5_000;
const FIRST_BACKOFF_MS = 2;
const MAX_BACKOFF_MS = 250;

// One queue set per store, i.e. per NATS connection: the writers it serializes are
// the ones that would otherwise collide with each other. Writers elsewhere (another
// process, the scheduler's deadline and tick appends) are met by the guarded append.
// async-lock runs one function at a time per key, in arrival order, and forgets a key
// once nothing runs or waits on it. No cap on waiters (its default refuses the 1,001st):
// the time budget sheds load instead.
const queues = new WeakMap<EventStore, AsyncLock>();

function queuesOf(store: EventStore): AsyncLock {
  let q = queues.get(store);
  if (!q) queues.set(store, (q = new AsyncLock({ maxPending: Infinity })));
  return q;
}

/** Whether commands run or wait on some subject in this process. */
export const subjectsBusy = (store: EventStore): boolean => queues.get(store)?.isBusy() ?? false;

const contended = () => new ApiError(503, 'Too many concurrent changes to this resource; retry', null, { 'Retry-After': '1' });

/**
 * Runs `attempt` (load → decide → guarded append) for one aggregate until it does
 * not conflict. Attempts on one key in this process run one after another, so they
 * do not conflict with each other at all; a conflict with another process is met
 * by deciding again after a jittered, growing pause. The conflict count is not the
 * limit, time is: `budgetMs` after the call, queueing included, the caller gets a
 * 503 with Retry-After (or `onContended`'s error), never the ConcurrencyError (a
 * 500). A command whose turn comes after its budget is spent is not tried: the
 * queue sheds load instead of growing while the store is slow.
 */
export function retryConflicts<T>(
  deps: Pick<CommandDeps, 'store'>,
  key: string,
  attempt: () => Promise<T>,
  budgetMs = CONFLICT_BUDGET_MS,
  onContended: () => Error = contended,
): Promise<T> {
  const deadline = Date.now() + budgetMs;
  return queuesOf(deps.store).acquire(key, async () => {
    for (let conflicts = 0; ; conflicts++) {
      // The key names an organization and an aggregate: not for a ping_url caller to read.
      if (Date.now() > deadline) throw onContended();
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof ConcurrencyError)) throw err;
        // Full jitter: writers that collided pick apart instead of colliding again in step.
        const pause = Math.random() * Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** conflicts);
        if (Date.now() + pause > deadline) throw onContended();
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  });
}

/**
 * Appends one decision's events to their subject in order, each guarded by the
 * sequence of the one before it (the first by `expectedSeq`); returns the last
 * one's sequence (`expectedSeq` when there are none). Should a later event
 * conflict, the earlier ones stay stored: the command is decided again on a state
 * that includes them.
 */
export async function appendEvents(store: EventStore, subject: string, events: readonly Envelope[], expectedSeq: number): Promise<number> {
  distinctIds(subject, events);
  let seq = expectedSeq;
  for (const event of events) seq = await store.append(subject, event, seq);
  return seq;
}

/** {@link appendEvents} as one commit: all of them stored, or none. */
export async function appendCommit(store: EventStore, subject: string, events: readonly Envelope[], expectedSeq: number | undefined): Promise<number> {
  distinctIds(subject, events);
  return store.appendCommit(subject, events, expectedSeq);
}

/** One id twice would be dropped as a duplicate publish (or dedupe a commit's reader), silently. */
function distinctIds(subject: string, events: readonly Envelope[]): void {
  if (new Set(events.map((e) => e.id)).size !== events.length) throw new Error(`a decision on ${subject} gave two events one id`);
}

/** The state after `events`, from `state`. */
export const fold = <S, E>(evolve: Evolve<S, E>, state: S | null, events: readonly E[]): S | null =>
  events.reduce<S | null>((s, e) => evolve(s, e), state);

/**
 * A decision from the head this process remembers, when it has one and the decision
 * is stored; null when it must be decided again from the log: the head was stale (a
 * wrong last sequence), or the decision refused (an error the command answers with) or
 * did nothing, which a stale head could also explain. Another failure (a publish
 * that timed out, and may have been stored) is the command's answer, as on a load.
 */
async function fromHead<S, E>(
  store: EventStore,
  subject: string,
  heads: Heads<S> | undefined,
  decideAndAppend: (state: S | null, seq: number) => Promise<Decided<S, E>>,
): Promise<Decided<S, E> | null> {
  const head = heads?.get(store, subject);
  if (!heads || !head) return null;
  try {
    const decided = await decideAndAppend(head.state, head.seq);
    if (decided.events.length > 0) {
      heads.set(store, subject, decided.state, decided.seq);
      return decided;
    }
  } catch (err) {
    heads.drop(store, subject);
    if (!(err instanceof ConcurrencyError || err instanceof ApiError)) throw err;
  }
  heads.drop(store, subject);
  return null;
}

/**
 * One load → decide → guarded append, without the queue or the retry: for a caller
 * that already holds the subject's turn (`retryConflicts`), or its own. With `heads`,
 * the load is skipped when this process remembers the subject's head (`fromHead`).
 */
export async function executeOnce<S, C, E extends Envelope>(
  deps: CommandDeps,
  subject: string,
  command: C,
  decide: Decide<S, C, E>,
  evolve: Evolve<S, E>,
  options: Pick<ExecuteOptions<S, C>, 'gather' | 'heads' | 'initial' | 'commit'> = {},
): Promise<Decided<S, E>> {
  const decideAndAppend = async (state: S | null, seq: number): Promise<Decided<S, E>> => {
    const meta = commandMeta(deps.clock);
    const events = decide(options.gather ? await options.gather(command, state, meta) : command, state, meta);
    const stored = options.commit && events.length > 0 ? await appendCommit(deps.store, subject, events, seq) : await appendEvents(deps.store, subject, events, seq);
    return { events, state: fold(evolve, state, events), seq: stored };
  };
  const remembered = await fromHead(deps.store, subject, options.heads, decideAndAppend);
  if (remembered) return remembered;
  const last = await deps.store.last<E>(subject);
  try {
    const state = last ? evolve(null, last.event) : options.initial ? await options.initial() : null;
    const decided = await decideAndAppend(state, last?.seq ?? 0);
    if (decided.events.length > 0) options.heads?.set(deps.store, subject, decided.state, decided.seq);
    return decided;
  } catch (err) {
    options.heads?.drop(deps.store, subject);
    throw err;
  }
}

/**
 * Load → decide → guarded append. The aggregate's state is carried by its last
 * event; a concurrent writer makes an append fail and the whole command is decided
 * again on the fresh state (see `retryConflicts`). A decision of no events appends
 * nothing and answers the state as loaded.
 */
export function execute<S, C, E extends Envelope>(
  deps: CommandDeps,
  subject: string,
  command: C,
  decide: Decide<S, C, E>,
  evolve: Evolve<S, E>,
  options: ExecuteOptions<S, C> = {},
): Promise<Decided<S, E>> {
  return retryConflicts(deps, subject, () => executeOnce(deps, subject, command, decide, evolve, options), CONFLICT_BUDGET_MS, options.contended);
}
