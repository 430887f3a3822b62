/**
 * A log for rebuild tests: old single-event messages and commits side by side, with
 * what COPY's text format and Postgres treat specially in their text.
 */
import { commitMessage } from '../../src/commands/commit.ts';
import type { JetcronEvent } from '../../src/commands/events.ts';
import { encodeJson } from '../../src/lib/json.ts';
import type { Nats } from '../../src/nats/connection.ts';
import { SUBJECTS } from '../../streams/subjects.ts';

export type LogMessage = JetcronEvent | ReturnType<typeof commitMessage>;

export const ORG = 'org_copytest';
// What COPY's text format and Postgres treat specially: a tab, line breaks, backslashes, NUL, a lone surrogate, `\N`.
export const AWKWARD = 'tab\there\nline\r\\N back\\slash nul\u0000 lone\ud800 "quoted" é';
let clock = Date.parse('2026-01-05T10:00:00.000Z');
export const at = () => new Date((clock += 1000)).toISOString();
let n = 0;
export const ev = (type: string, data: unknown, org = ORG) => ({ type, id: `evt_copy_${++n}`, at: at(), org_id: org, data }) as unknown as JetcronEvent;

export function task(i: number, extra: Record<string, unknown> = {}) {
  const created = at();
  return {
    id: `tsk_copy_${i}`, org_id: ORG, name: i % 3 ? `task ${i}` : `task ${AWKWARD}`, url: `https://api.example.com/${i}`, method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Odd': AWKWARD }, body: { n: i, text: AWKWARD }, delay: null, run_at: null, timeout_ms: 30_000,
    retry_attempts: 3, callback_url: null, lane: i % 4 ? null : `lane-${i}`, flow_control: i % 5 ? null : { key: `key-${i % 2}`, parallelism: 2, rate: null, period: null },
    enabled: true, notify_on_failure: null, notify_on_recovery: null, expected_status_codes: null, expected_body_pattern: null, on_failure_url: null,
    on_recovery_url: null, script: null, debounce: null, debounce_key: null, created_at: created, updated_at: created,
    pending_execution: { id: `exe_copy_${i}`, scheduled_for: created, callback_url: null }, ...extra,
  };
}

export function finished(executionId: string, source: { type: string; id: string; name: string }, attempt: number, ok: boolean, retryAt: string | null) {
  const done = at();
  return ev('AttemptFinished', {
    execution_id: executionId, source, attempt, status: ok ? 'success' : 'failed', status_code: ok ? 200 : 503, error_message: ok ? null : `HTTP 503 ${AWKWARD}`,
    scheduled_for: done, started_at: done, finished_at: done, duration_ms: 40 + attempt,
    request: { method: 'POST', url: 'https://api.example.com/x', headers: { 'X-Odd': AWKWARD }, body: `{"text":${JSON.stringify(AWKWARD)}}` },
    response_body: ok ? AWKWARD : null, response_truncated: false, response_headers: ok ? { 'content-type': 'text/plain', 'x-odd': AWKWARD } : null,
    script_logs: attempt > 1 ? [AWKWARD, 'second line'] : [], next_attempt_at: retryAt, final: retryAt === null, callback_url: null, push_callback_url: null, lane: null,
  });
}

/** Messages as the log holds them: old single events and commits, side by side. */
export function history(): LogMessage[] {
  const out: LogMessage[] = [];
  const created = at();
  out.push(ev('OrganizationCreated', { organization: { id: ORG, name: 'copy', plan: 'pro', webhook_secret: 'whsec_x', notification_email: null, notification_webhook_url: null, notify_on_failure: true, notify_on_recovery: true, created_at: created, updated_at: created } }));
  const monitor = {
    id: 'mon_copy', org_id: ORG, token: 'tok_copy', name: 'backup', schedule_type: 'interval', interval_seconds: 3600, cron_expression: null, timezone: 'UTC',
    grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null, sync_key: null,
    max_duration_seconds: null, min_duration_seconds: null, slug: null, status: 'new', down_reason: null, paused: false, last_ping_at: null,
    next_expected_at: null, late_at: null, runs: [], deadline_at: null, created_at: created, updated_at: created,
  };
  out.push(ev('MonitorCreated', { monitor }));
  const endpoint = {
    id: 'ep_copy', org_id: ORG, slug: 'in-copy', name: 'hooks', forward_urls: ['https://app.example.com/hooks'], retry_attempts: 5, use_lane: false, enabled: true,
    forward_method: null, forward_headers: null, forward_body: null, on_failure_url: null, on_recovery_url: null, notify_on_failure: null, notify_on_recovery: null,
    script: null, paused: false, secret_names: [], sealed_secrets: null, created_at: created, updated_at: created,
  };
  out.push(ev('EndpointCreated', { endpoint }));
  const inbound = (i: number) => {
    const exe = { execution_id: `exe_copy_in_${i}`, url: endpoint.forward_urls[0]!, method: null, headers: null, body: null, scheduled_for: at() };
    return [
      ev('InboundEventReceived', {
        event: { id: `evt_copy_in_${i}`, endpoint_id: endpoint.id, method: 'POST', path: '/', query: AWKWARD, source_ip: '10.0.0.1', received_at: at(), body_size: 10, inbound_seq: i + 1, outcome: 'forwarding' },
        endpoint: { id: endpoint.id, name: endpoint.name, use_lane: false, retry_attempts: 5 }, executions: [exe],
      }),
      finished(exe.execution_id, { type: 'endpoint', id: endpoint.id, name: endpoint.name }, 1, true, null),
    ];
  };
  for (let i = 0; i < 24; i++) {
    const t = task(i);
    const source = { type: 'task', id: t.id, name: t.name };
    const create = ev('TaskCreated', { task: t, execution: t.pending_execution });
    const results = i % 3 === 0
      ? [finished(t.pending_execution.id, source, 1, false, at()), ev('AttemptStarted', { execution_id: t.pending_execution.id, attempt: 2, started_at: at(), source }), finished(t.pending_execution.id, source, 2, true, null)]
      : [finished(t.pending_execution.id, source, 1, i % 7 !== 0, null)];
    // Every other task as a commit of its create and results (the owners' way); the others one event per message.
    if (i % 2) out.push(commitMessage(`cmt_copy_${i}`, [create, ...results], new Date()));
    else out.push(create, ...results);
    if (i % 6 === 1) out.push(ev('TaskUpdated', { task: { ...t, name: `renamed ${AWKWARD}`, updated_at: at() }, changed: ['name'] }));
    if (i % 8 === 5) {
      const again = { id: `exe_copy_${i}_again`, scheduled_for: at(), callback_url: null };
      out.push(ev('TaskTriggered', { task: { ...t, pending_execution: again, updated_at: at() }, execution: again }), finished(again.id, source, 1, true, null));
    }
    if (i % 9 === 4) out.push(ev('TaskDeleted', { task: t }));
    const ping = { id: `png_copy_${i}`, received_at: at(), kind: 'success', exit_status: null, rid: null, duration_ms: null, method: 'POST', source_ip: '10.1.2.3', user_agent: AWKWARD, body: AWKWARD };
    out.push(ev('MonitorPinged', { monitor: { ...monitor, status: 'up', last_ping_at: ping.received_at, updated_at: ping.received_at }, ping, previous_status: i ? 'up' : 'new' }));
    if (i % 4 === 2) out.push(...inbound(i));
  }
  out.push(ev('EndpointDeleted', { endpoint }));
  // A delivery recorded just after its endpoint's deletion leaves no row.
  out.push(...inbound(99));
  return out;
}


/** Appends the messages to EVENTS (commits on a task subject, single events on their own); the last one's sequence. */
export async function appendLog(nats: Nats, messages: LogMessage[]): Promise<number> {
  let last = 0;
  for (const m of messages) {
    const subject = m.type === 'Commit' ? SUBJECTS.task(ORG, m.id) : `evt.${ORG}.copytest.${m.id}`;
    last = await nats.publish(subject, encodeJson(m), { msgId: m.id });
  }
  return last;
}
