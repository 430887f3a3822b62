/** What the design floor's two sides share (floor.ts starts floor-worker.ts, whose import runs it). */
import type { WorkerConfig } from './child.ts';

export const FLOOR_STREAM = 'FLOOR';

export interface FloorWorkerConfig extends WorkerConfig {
  natsUrl: string;
  databaseUrl: string;
  /** `lanes`: one job at a time per lane, in order; `free`: every job its own lane. */
  shape: 'lanes' | 'free';
  partitions: number;
  /** Jobs in flight at most (BullMQ's worker runs 128). */
  concurrency: number;
}

/** A task's spec as a create stores it (the fields of jetcron's, so the bytes are alike). */
export function taskSpec(id: string, lane: string): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    id, lane, name: id, method: 'POST', url: `http://127.0.0.1/hit?id=${id}`, headers: {}, body: null, delay: null, run_at: null, timeout_ms: 30_000,
    retry_attempts: 0, callback_url: null, flow_control: null, enabled: true, notify_on_failure: null, notify_on_recovery: null,
    expected_status_codes: null, expected_body_pattern: null, on_failure_url: null, on_recovery_url: null, script: null, debounce: null,
    debounce_key: null, created_at: now, updated_at: now,
  };
}
