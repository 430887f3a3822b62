import type { ExecutionEvent } from './types.ts';

/** A result an owner records after it was fenced: an attempt or a callback delivery it made, marked history only. */
export type LateResult = Extract<ExecutionEvent, { type: 'AttemptFinished' | 'CallbackAttempted' }>;

export const canBeLate = (e: ExecutionEvent): e is LateResult => e.type === 'AttemptFinished' || e.type === 'CallbackAttempted';

/** The result as a fenced owner stores it on the execution's own subject. */
export function lateResult(e: LateResult): LateResult {
  return { ...e, data: { ...e.data, late: true } } as LateResult;
}

/** Whether an event is a fenced owner's late result (see `LateMark`): it changes no execution's state. */
export function isLate(e: ExecutionEvent): boolean {
  return canBeLate(e) && e.data.late === true;
}

/**
 * The late result as the partition's owner records it as its own: the same attempt,
 * which the execution was still waiting for, so it is not sent a second time. An id of
 * its own: the late event stays in the log as what it was.
 */
export function adoptedResult(e: LateResult): LateResult {
  const { late: _late, ...data } = e.data;
  return { ...e, id: `${e.id}.adopted`, data } as LateResult;
}

/**
 * Whether the owner holding an execution adopts this late result: only while the
 * execution waits (not sent by this owner) for exactly that attempt, or that callback
 * delivery. Anything else already moved on, and the late result stays history.
 */
export function adoptsLate(e: LateResult, held: { phase: string; attempt: number; callbackAttempt: number | null }): boolean {
  if (e.type === 'AttemptFinished') return held.phase === 'queued' && held.attempt === e.data.attempt;
  return held.phase === 'callback' && held.callbackAttempt === e.data.attempt;
}
