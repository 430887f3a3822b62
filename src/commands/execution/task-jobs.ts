import type { PlannedExecution, Task } from '../task/types.ts';
import type { AttemptJob } from './job.ts';

function hasHeader(headers: Record<string, string>, name: string): boolean {
  const lower = name.toLowerCase();
  return Object.keys(headers).some((h) => h.toLowerCase() === lower);
}

type RequestSpec = Pick<Task, 'url' | 'method' | 'headers' | 'body' | 'timeout_ms'>;

/** The request a task or schedule sends: a JSON body goes as its JSON text, typed unless the user typed it. */
export function taskRequest(task: RequestSpec): AttemptJob['request'] {
  const headers = { ...task.headers };
  let body: string | null = null;
  if (typeof task.body === 'string') body = task.body;
  else if (task.body !== null && task.body !== undefined) {
    body = JSON.stringify(task.body);
    if (!hasHeader(headers, 'content-type')) headers['Content-Type'] = 'application/json';
  }
  return { url: task.url, method: task.method, headers, body, timeout_ms: task.timeout_ms };
}

export function parseStatusCodes(text: string | null): number[] | null {
  if (!text) return null;
  const codes = text.split(',').map((s) => Number(s.trim())).filter((n) => Number.isInteger(n));
  return codes.length ? codes : null;
}

export function taskAttemptJob(task: Task, execution: PlannedExecution, attempt: number): AttemptJob {
  return {
    kind: 'attempt',
    org_id: task.org_id,
    execution_id: execution.id,
    source: { type: 'task', id: task.id, name: task.name },
    attempt,
    max_attempts: 1 + task.retry_attempts,
    scheduled_for: execution.scheduled_for,
    request: taskRequest(task),
    expected_status_codes: parseStatusCodes(task.expected_status_codes),
    expected_body_pattern: task.expected_body_pattern || null,
    callback_url: execution.callback_url ?? task.callback_url,
    push_callback_url: execution.callback_url,
    lane: task.lane || null,
    script: task.script ?? null,
  };
}
