import { unprocessable } from '../../lib/errors.ts';
import { parseDuration } from '../../lib/duration.ts';
import { checkDuration, checkLength, checkRange } from '../payload-checks.ts';
import type { KeyLimits } from './key-queue.ts';
import type { FlowControl, FlowControlInput } from './types.ts';

export const MAX_FLOW_KEY_LENGTH = 255;
export const FLOW_PARALLELISM = { minimum: 1, maximum: 1000 } as const;
export const FLOW_RATE = { minimum: 1, maximum: 100_000 } as const;
export const DEFAULT_FLOW_PERIOD = '1s';

/**
 * The contract's rules for `flow_control` (tasks: `needsKey`; an endpoint's key is the
 * endpoint), each break naming its field (`flow_control.rate`, …).
 */
export function checkFlowControl(input: FlowControlInput | null | undefined, opts: { needsKey: boolean }): void {
  if (input == null) return;
  const field = 'flow_control';
  if (opts.needsKey) {
    if (input.key == null) throw unprocessable(`${field}.key is required`, `${field}.key`);
    checkLength(input.key, `${field}.key`, MAX_FLOW_KEY_LENGTH, 1);
  } else if (input.key !== undefined) {
    throw unprocessable(`unknown field "${field}.key": an endpoint's forwards are keyed by the endpoint`, `${field}.key`);
  }
  checkRange(input.parallelism, `${field}.parallelism`, FLOW_PARALLELISM);
  checkRange(input.rate, `${field}.rate`, FLOW_RATE);
  checkDuration(input.period, `${field}.period`);
  if (input.period != null && !(parseDuration(input.period)! > 0)) throw unprocessable(`${field}.period must be longer than 0s`, `${field}.period`);
  if (input.parallelism == null && input.rate == null) throw unprocessable(`${field} needs parallelism, rate or both`, field);
}

/** The stored limits: absent ones null, the period defaulted (a task's keeps its key beside them). */
export function normalizeLimits(input: FlowControlInput): Omit<FlowControl, 'key'> {
  return { parallelism: input.parallelism ?? null, rate: input.rate ?? null, period: input.period ?? DEFAULT_FLOW_PERIOD };
}

/** What a key's queue enforces. The period is wall clock: not scaled by JETCRON_TIME_SCALE. */
export function flowLimits(flow: Omit<FlowControl, 'key'>): KeyLimits {
  return { parallelism: flow.parallelism, rate: flow.rate, periodMs: parseDuration(flow.period) ?? 1000, strict: false };
}
