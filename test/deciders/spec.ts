// Given/when/then for pure deciders: given = prior events (or a state), when = a
// command decided at a fixed time with counted ids, then = the events, none, or the error.
import assert from 'node:assert/strict';
import type { Decide, Evolve } from '../../src/commands/execute.ts';
import { fold } from '../../src/commands/execute.ts';
import type { CommandMeta } from '../../src/commands/meta.ts';
import { ApiError } from '../../src/lib/errors.ts';

export const NOW = '2026-03-01T12:00:00.000Z';
export const NOW_MS = Date.parse(NOW);
export const later = (ms: number, from = NOW_MS) => new Date(from + ms).toISOString();

/**
 * Time and ids as a decider sees them, fixed: the event id is `evt_test`, other ids
 * count per prefix (`tsk_1`, `exe_1`, `evt_1` …), waits are multiplied by `scale`.
 */
export function meta(now = NOW, scale = 1): CommandMeta {
  const counts = new Map<string, number>();
  const nowMs = Date.parse(now);
  return {
    now: new Date(nowMs).toISOString(),
    nowMs,
    eventId: 'evt_test',
    scaleWait: (ms) => Math.max(0, Math.round(ms * scale)),
    newId: (prefix) => {
      const n = (counts.get(prefix) ?? 0) + 1;
      counts.set(prefix, n);
      return `${prefix}_${n}`;
    },
  };
}

/** The error a decision should refuse with: its status, and its field when it names one. */
export interface Refusal {
  status: number;
  field?: string | null;
  message?: string | RegExp;
}

/** Every key of `expected` is in `actual` with that value (objects recursively; arrays whole, element by element). */
export function assertMatches(actual: unknown, expected: unknown, path = '$'): void {
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${path}: expected an array`);
    assert.equal(actual.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => assertMatches(actual[i], e, `${path}[${i}]`));
  } else if (expected && typeof expected === 'object') {
    assert.ok(actual && typeof actual === 'object', `${path}: expected an object`);
    for (const [k, v] of Object.entries(expected)) assertMatches((actual as Record<string, unknown>)[k], v, `${path}.${k}`);
  } else {
    assert.deepStrictEqual(actual, expected, path);
  }
}

export function deciderSpec<S, C, E>(decide: Decide<S, C, E>, evolve: Evolve<S, E>) {
  const whenOn = (state: S | null) => (command: C, at: CommandMeta = meta()) => {
    const run = () => decide(command, state, at);
    return {
      /** Exactly these events, in order. */
      then(expected: E[]): E[] {
        const events = run();
        assert.deepStrictEqual(events, expected);
        return events;
      },
      /** These events, each given by some of its fields. */
      thenMatches(expected: unknown[]): E[] {
        const events = run();
        assertMatches(events, expected);
        return events;
      },
      /** No event: nothing to append. */
      thenNothing(): void {
        assert.deepStrictEqual(run(), []);
      },
      thenRefuses(refusal: Refusal): void {
        assert.throws(run, (err: unknown) => {
          assert.ok(err instanceof ApiError, `expected an ApiError, got ${String(err)}`);
          assert.equal(err.status, refusal.status, err.message);
          if (refusal.field !== undefined) assert.equal(err.field, refusal.field);
          if (typeof refusal.message === 'string') assert.equal(err.message, refusal.message);
          else if (refusal.message) assert.match(err.message, refusal.message);
          return true;
        });
      },
      /** Any other error (e.g. a conflict to decide again). */
      thenThrows(check: (err: unknown) => boolean): void {
        assert.throws(run, check);
      },
    };
  };
  return {
    /** The state after these events (none: the aggregate does not exist). */
    given: (events: E[]) => ({ when: whenOn(fold(evolve, null, events)) }),
    givenState: (state: S | null) => ({ when: whenOn(state) }),
    /** The state `events` lead to, for building the next `given`. */
    stateAfter: (events: E[]) => fold(evolve, null, events),
  };
}
