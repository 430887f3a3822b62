import type { Envelope } from '../envelope.ts';

/** A debounce window: requests with one lane + debounce_key until `run_at` update one task. */
export interface DebounceWindow {
  lane: string;
  debounce_key: string;
  task_id: string;
  opened_at: string;
  run_at: string;
}

export type DebounceEvent = Envelope<'DebounceWindowOpened', { window: DebounceWindow }>;
