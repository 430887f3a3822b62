import type { Envelope } from '../envelope.ts';

/** A task's (or an endpoint's) flow control as stored: every field set, `period` defaulted. */
export interface FlowControl {
  key: string;
  parallelism: number | null;
  rate: number | null;
  period: string;
}

/** As a request sends it: `key` (an endpoint's is the endpoint), at least one of `parallelism` and `rate`. */
export interface FlowControlInput {
  key?: string;
  parallelism?: number | null;
  rate?: number | null;
  period?: string | null;
}

/** A key's own state: only whether it is paused (its limits come from the tasks naming it). */
export interface FlowKey {
  org_id: string;
  key: string;
  paused: boolean;
}

export type FlowKeyEvent =
  | Envelope<'FlowControlPaused', { key: string }>
  | Envelope<'FlowControlResumed', { key: string }>;

export const FLOW_KEY_EVENT_TYPES: ReadonlySet<string> = new Set<FlowKeyEvent['type']>(['FlowControlPaused', 'FlowControlResumed']);

export type FlowKeyCommand = { type: 'PauseFlowKey' } | { type: 'ResumeFlowKey' };
