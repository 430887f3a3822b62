import type { Envelope } from '../events/envelope.ts';
import { ConcurrencyError, type EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import { newId } from '../lib/ids.ts';
import type { CommandMeta } from './meta.ts';

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

const MAX_CONFLICT_RETRIES = 5;

/**
 * Load → decide → guarded append. The aggregate's state is carried by its last
 * event; a concurrent writer makes the append fail and we decide again on the
 * fresh state, a bounded number of times.
 */
export async function execute<S, C, E extends Envelope>(
  deps: CommandDeps,
  subject: string,
  command: C,
  decide: (command: C, state: S | null, meta: CommandMeta) => E,
  evolve: (state: S | null, event: E) => S | null,
): Promise<Decided<S, E>> {
  for (let attempt = 0; ; attempt++) {
    const last = await deps.store.last<E>(subject);
    const state = last ? evolve(null, last.event) : null;
    const event = decide(command, state, commandMeta(deps.clock));
    try {
      const seq = await deps.store.append(subject, event, last?.seq ?? 0);
      return { event, state: evolve(state, event), seq };
    } catch (err) {
      if (!(err instanceof ConcurrencyError) || attempt >= MAX_CONFLICT_RETRIES) throw err;
      // Jitter so writers that collided do not collide again in step.
      await new Promise((r) => setTimeout(r, Math.random() * 2 * (attempt + 1)));
    }
  }
}
