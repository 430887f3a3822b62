import type { PlannedRun, Schedule } from '../schedule/types.ts';
import type { AttemptJob } from './job.ts';
import { parseStatusCodes, taskRequest } from './task-jobs.ts';

export function scheduleAttemptJob(schedule: Schedule, execution: PlannedRun, attempt: number): AttemptJob {
  return {
    kind: 'attempt',
    org_id: schedule.org_id,
    execution_id: execution.id,
    source: { type: 'schedule', id: schedule.id, name: schedule.name },
    attempt,
    max_attempts: 1 + schedule.retry_attempts,
    scheduled_for: execution.scheduled_for,
    request: taskRequest(schedule),
    expected_status_codes: parseStatusCodes(schedule.expected_status_codes),
    expected_body_pattern: null,
    callback_url: execution.callback_url,
    push_callback_url: execution.callback_url,
    lane: null,
    script: schedule.script ?? null,
    next_tick_at: schedule.next_run_at,
  };
}
