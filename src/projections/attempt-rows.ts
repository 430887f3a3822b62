import type { Selectable } from 'kysely';
import type { ExecutionAttemptsTable, ExecutionsTable } from '../db/schema.ts';

/**
 * The statuses an attempt can end an execution with. An execution in one of them holds
 * its last attempt in its own row (status, code, times, error), so that attempt has no
 * row of its own in `execution_attempts`: only attempts a retry followed do (and any
 * attempt projected before this rule, or one whose execution was then cancelled).
 */
export const ATTEMPT_ENDINGS = ['success', 'failed', 'timeout'];

type Attempt = Selectable<ExecutionAttemptsTable>;

/** An execution's attempts in order: its rows, then the last one its own row holds (once, if a row has it too). */
export function attemptsOf(execution: Selectable<ExecutionsTable>, rows: Attempt[]): Attempt[] {
  if (!ATTEMPT_ENDINGS.includes(execution.status) || !execution.finished_at) return rows;
  if (rows.some((r) => r.attempt === execution.attempt)) return rows;
  const { id, attempt, status, status_code, started_at, finished_at, duration_ms, error_message } = execution;
  return [...rows, { execution_id: id, attempt, status, status_code, started_at, finished_at, duration_ms, error_message }];
}
