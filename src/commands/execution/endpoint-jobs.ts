import type { EndpointSnapshot, ForwardPlan } from '../inbound-event/types.ts';
import type { AttemptJob } from './job.ts';

/** Forwarding requests get the task default: 30 s. */
export const ENDPOINT_TIMEOUT_MS = 30_000;

/**
 * The lane that serializes an endpoint's deliveries. The spec derives it from the
 * endpoint; we use the id, not the name: names are neither unique nor fixed, and a
 * rename must not split one endpoint's queue in two.
 */
export const endpointLane = (endpointId: string) => `endpoint:${endpointId}`;

export function endpointAttemptJob(
  orgId: string,
  endpoint: EndpointSnapshot,
  ref: { event_id: string; seq: number; origin_seq: number },
  plan: ForwardPlan,
  attempt: number,
  scheduledFor = plan.scheduled_for,
  scriptLogs?: string[],
): AttemptJob {
  return {
    kind: 'attempt',
    org_id: orgId,
    execution_id: plan.execution_id,
    source: { type: 'endpoint', id: endpoint.id, name: endpoint.name },
    attempt,
    max_attempts: 1 + endpoint.retry_attempts,
    scheduled_for: scheduledFor,
    // Method, headers and body come from INBOUND and `inbound` when it is sent: not carried twice.
    request: { url: plan.url, method: '', headers: {}, body: null, timeout_ms: ENDPOINT_TIMEOUT_MS },
    expected_status_codes: null,
    expected_body_pattern: null,
    callback_url: null,
    push_callback_url: null,
    lane: endpoint.use_lane ? endpointLane(endpoint.id) : null,
    inbound: {
      ...ref, method: plan.method, headers: plan.headers, body: plan.body,
      ...(plan.script_error ? { script_error: plan.script_error } : {}),
      ...(scriptLogs?.length ? { script_logs: scriptLogs } : {}),
    },
  };
}
