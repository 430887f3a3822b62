import type { AttemptJob } from './job.ts';
import type { OutboundResult } from './exchange.ts';
import { parseRetryAfter } from './retry-after.ts';

export interface AttemptOutcome {
  status: 'success' | 'failed' | 'timeout';
  status_code: number | null;
  error_message: string | null;
  /** A transient failure: another attempt may succeed. */
  retryable: boolean;
  /** The target asked for at least this long before the next try (429 Retry-After). */
  retry_after_ms: number | null;
}

function expectedCode(job: AttemptJob, code: number): boolean {
  return job.expected_status_codes ? job.expected_status_codes.includes(code) : code >= 200 && code < 300;
}

/** Success, permanent failure or transient failure, from one attempt's result. */
export function classifyAttempt(job: AttemptJob, result: OutboundResult, nowMs: number): AttemptOutcome {
  if (result.kind === 'error') {
    const retryable = result.error === 'timeout' || result.error === 'connection';
    return {
      status: result.error === 'timeout' ? 'timeout' : 'failed',
      status_code: null,
      error_message: result.message,
      retryable,
      retry_after_ms: null,
    };
  }
  const code = result.statusCode;
  if (expectedCode(job, code)) {
    if (job.expected_body_pattern && !result.body.includes(job.expected_body_pattern)) {
      return { status: 'failed', status_code: code, error_message: `response body does not contain "${job.expected_body_pattern}"`, retryable: false, retry_after_ms: null };
    }
    return { status: 'success', status_code: code, error_message: null, retryable: false, retry_after_ms: null };
  }
  if (code === 429) {
    const after = parseRetryAfter(result.headers['retry-after'], nowMs);
    return { status: 'failed', status_code: code, error_message: 'HTTP 429 Too Many Requests', retryable: true, retry_after_ms: after ?? 60_000 };
  }
  return {
    status: 'failed',
    status_code: code,
    error_message: `HTTP ${code}${job.expected_status_codes ? ` (expected ${job.expected_status_codes.join(',')})` : ''}`,
    retryable: code >= 500,
    retry_after_ms: null,
  };
}

const SECRET_HEADER = /auth|token|secret|password|api[-_]?key|cookie/i;

/** Headers as recorded for the execution: values of credential-like headers hidden. */
export function maskHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) out[k] = SECRET_HEADER.test(k) ? '***' : v;
  return out;
}
