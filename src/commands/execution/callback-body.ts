import type { AttemptResult } from './types.ts';

/** The spec's callback payload, as the text that is signed and sent. */
export function callbackBody(d: AttemptResult): string {
  return JSON.stringify({
    event: 'execution.completed',
    task_id: d.source.id,
    execution_id: d.execution_id,
    status: d.status,
    status_code: d.status_code,
    duration_ms: d.duration_ms,
    started_at: d.started_at,
    finished_at: d.finished_at,
    attempt: d.attempt,
  });
}
