// Destination health (CONTRACT.md "Destination health: auto-disable"): the schedule and
// endpoint deciders count final results, reset on a success, disable after the time AND
// the count, count a result once, and come back by an owner's action.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideSchedule, evolveSchedule } from '../../src/commands/schedule/decide.ts';
import type { Schedule, ScheduleEvent } from '../../src/commands/schedule/types.ts';
import { decideEndpoint, evolveEndpoint } from '../../src/commands/endpoint/decide.ts';
import { forwardDisabled, forwardHealthOf, type Endpoint, type EndpointEvent } from '../../src/commands/endpoint/types.ts';
import { decideOrganization, autoDisableAfterMs } from '../../src/commands/organization/decide.ts';
import type { FinalResult } from '../../src/commands/destination-health.ts';
import { planAttempt } from '../../src/commands/execution/decide.ts';
import { deciderSpec, later, meta, NOW_MS } from './spec.ts';

const ORG = 'org_health';
const HOUR = 3_600_000;
const schedules = deciderSpec(decideSchedule, evolveSchedule);
const endpoints = deciderSpec(decideEndpoint, evolveEndpoint);

const schedule = schedules.stateAfter(decideSchedule({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: 'https://example.com/job', cron: '0 * * * *' } }, null, meta()))!;
const A = 'https://a.example.com/hook';
const B = 'https://b.example.com/hook';
const endpoint = endpoints.stateAfter(decideEndpoint({ type: 'CreateEndpoint', orgId: ORG, plan: 'free', input: { name: 'hooks', forward_urls: [A, B] }, secrets: null }, null, meta()))!;

/** Result `n` (its seq is n), finished `hoursIn` hours after NOW; the rule's window is 5 hours here. */
const result = (n: number, ok: boolean, hoursIn: number, disableAfterMs: number | null = 5 * HOUR): FinalResult =>
  ({ executionId: `exe_${n}`, seq: n, ok, at: later(hoursIn * HOUR), disableAfterMs });

/** Folds the results through the schedule decider: every event, and the state after. */
function runSchedule(results: FinalResult[], from: Schedule = schedule) {
  let state: Schedule | null = from;
  const events: ScheduleEvent[] = [];
  for (const r of results) {
    const out = decideSchedule({ type: 'CountResult', result: r }, state, meta());
    for (const e of out) state = evolveSchedule(state, e);
    events.push(...out);
  }
  return { events, state: state! };
}

function runEndpoint(results: Array<[string, FinalResult]>, from: Endpoint = endpoint) {
  let state: Endpoint | null = from;
  const events: EndpointEvent[] = [];
  for (const [url, r] of results) {
    const out = decideEndpoint({ type: 'CountForwardResult', url, result: r }, state, meta());
    for (const e of out) state = evolveEndpoint(state, e);
    events.push(...out);
  }
  return { events, state: state! };
}

describe('destination health: schedules', () => {
  test('three failures in a row are not enough before auto_disable_after has passed', () => {
    const { events, state } = runSchedule([result(1, false, 0), result(2, false, 1), result(3, false, 2), result(4, false, 4.9)]);
    assert.deepEqual(events.map((e) => e.type), Array(4).fill('ScheduleFailureCounted'));
    assert.equal(state.enabled, true);
    assert.deepEqual(state.health, { failing_since: later(0), consecutive_failures: 4, counted_seq: 4 });
  });

  test('failing for auto_disable_after AND at least 3 in a row disables it once, with the reason', () => {
    const { events, state } = runSchedule([result(1, false, 0), result(2, false, 6), result(3, false, 6.5), result(4, false, 7)]);
    assert.deepEqual(events.map((e) => e.type), ['ScheduleFailureCounted', 'ScheduleFailureCounted', 'ScheduleDisabled']);
    const disabled = events[2] as Extract<ScheduleEvent, { type: 'ScheduleDisabled' }>;
    assert.equal(disabled.data.execution_id, 'exe_3');
    assert.equal(disabled.id, `${schedule.id}.health.exe_3`, 'its id derives from the result: a repeat is one message');
    assert.equal(disabled.data.execution, undefined, 'no run given: only its id');
    const run = { id: 'exe_9', status: 'timeout', status_code: null, error_message: 'timed out', attempt: 2, scheduled_for: later(0), finished_at: later(7 * HOUR) };
    const withRun = runSchedule([result(1, false, 0), result(2, false, 6), { ...result(9, false, 7), run }]);
    assert.deepEqual((withRun.events[2] as typeof disabled).data.execution, run, 'the disabling run travels to its notification');
    assert.equal(state.enabled, false);
    assert.equal(state.disabled_reason, 'failing');
    assert.equal(state.next_run_at, null);
  });

  test('two failures over a long time are not enough: the count matters too', () => {
    const { state } = runSchedule([result(1, false, 0), result(2, false, 100)]);
    assert.equal(state.enabled, true);
  });

  test('a success in between resets the count and the time', () => {
    const { events, state } = runSchedule([result(1, false, 0), result(2, false, 1), result(3, true, 2), result(4, false, 6), result(5, false, 7)]);
    assert.deepEqual(events.map((e) => e.type), ['ScheduleFailureCounted', 'ScheduleFailureCounted', 'ScheduleFailuresReset', 'ScheduleFailureCounted', 'ScheduleFailureCounted']);
    assert.equal(state.enabled, true);
    assert.deepEqual(state.health, { failing_since: later(6 * HOUR), consecutive_failures: 2, counted_seq: 5 });
    // A success with nothing to reset is no event.
    assert.deepEqual(runSchedule([result(1, true, 0)]).events, []);
  });

  test('a result is counted once: handed again (a reader replaying after a crash), it decides nothing', () => {
    const once = runSchedule([result(1, false, 0), result(2, false, 1)]);
    const again = runSchedule([result(2, false, 1), result(1, false, 0)], once.state);
    assert.deepEqual(again.events, []);
    assert.equal(again.state.health!.consecutive_failures, 2);
  });

  test('auto_disable_after null: counted, never disabled', () => {
    const { state } = runSchedule([1, 2, 3, 4].map((n) => result(n, false, n * 10, null)));
    assert.equal(state.enabled, true);
    assert.equal(state.health!.consecutive_failures, 4);
  });

  test('a disabled schedule counts nothing; PUT enabled: true clears the reason and the count', () => {
    const { state } = runSchedule([result(1, false, 0), result(2, false, 6), result(3, false, 7)]);
    assert.deepEqual(decideSchedule({ type: 'CountResult', result: result(4, false, 8) }, state, meta()), []);
    schedules.givenState(state).when({ type: 'UpdateSchedule', plan: 'free', input: { enabled: true } }).thenMatches([{
      type: 'ScheduleUpdated',
      data: { schedule: { enabled: true, disabled_reason: null, health: { failing_since: null, consecutive_failures: 0, counted_seq: 3 } } },
    }]);
    // Another change leaves the reason as it is.
    schedules.givenState(state).when({ type: 'UpdateSchedule', plan: 'free', input: { name: 'renamed' } }).thenMatches([{ data: { schedule: { enabled: false, disabled_reason: 'failing' } } }]);
  });

  test('a schedule deleted meanwhile: nothing', () => {
    assert.deepEqual(decideSchedule({ type: 'CountResult', result: result(1, false, 0) }, null, meta()), []);
  });
});

describe('destination health: forward URLs', () => {
  test('one URL disabled, the other untouched; the events carry every URL\'s health', () => {
    const { events, state } = runEndpoint([
      [A, result(1, false, 0)], [B, result(2, true, 0)], [A, result(3, false, 6)], [B, result(4, false, 6)], [A, result(5, false, 7)],
    ]);
    assert.deepEqual(events.map((e) => e.type), ['EndpointForwardFailureCounted', 'EndpointForwardFailureCounted', 'EndpointForwardFailureCounted', 'EndpointForwardDisabled']);
    assert.equal(forwardDisabled(state, A), true);
    assert.equal(forwardDisabled(state, B), false);
    assert.deepEqual(forwardHealthOf(state), [
      { url: A, status: 'disabled', failing_since: later(0), consecutive_failures: 3, disabled_at: later(7 * HOUR) },
      { url: B, status: 'active', failing_since: later(6 * HOUR), consecutive_failures: 1, disabled_at: null },
    ]);
    // A disabled URL counts nothing more.
    assert.deepEqual(runEndpoint([[A, result(6, false, 8)]], state).events, []);
  });

  test('counted once per result; a URL no longer forwarded to counts nothing', () => {
    const once = runEndpoint([[A, result(1, false, 0)]]);
    assert.deepEqual(runEndpoint([[A, result(1, false, 0)]], once.state).events, []);
    assert.deepEqual(runEndpoint([['https://gone.example.com', result(2, false, 0)]]).events, []);
  });

  test('enable: active again with a fresh count; an active URL is no event; an unknown URL is 422 naming url', () => {
    const { state } = runEndpoint([[A, result(1, false, 0)], [A, result(2, false, 6)], [A, result(3, false, 7)]]);
    endpoints.givenState(state).when({ type: 'EnableForward', url: A, recoverSince: later(-HOUR) }).thenMatches([{
      type: 'EndpointForwardEnabled',
      data: { url: A, recover_since: later(-HOUR), endpoint: { forward_health: [{ url: A, status: 'active', failing_since: null, consecutive_failures: 0, disabled_at: null, counted_seq: 3 }] } },
    }]);
    endpoints.givenState(state).when({ type: 'EnableForward', url: B, recoverSince: null }).then([]);
    endpoints.givenState(state).when({ type: 'EnableForward', url: 'https://nope.example.com', recoverSince: null }).thenRefuses({ status: 422, field: 'url' });
  });

  test('an update dropping a URL drops its health', () => {
    const { state } = runEndpoint([[A, result(1, false, 0)], [B, result(2, false, 0)]]);
    endpoints.givenState(state).when({ type: 'UpdateEndpoint', plan: 'free', input: { forward_urls: [B] }, secrets: null })
      .thenMatches([{ data: { endpoint: { forward_health: [{ url: B, consecutive_failures: 1 }] } } }]);
  });

  test('a delivery to a disabled URL is cancelled unsent', () => {
    const job = { org_id: ORG, execution_id: 'exe_1', source: { type: 'endpoint', id: endpoint.id, name: 'hooks' }, lane: null } as never;
    const plan = planAttempt({ job, sofar: null, sourceGone: false, forwardDisabled: true, requestGone: false, host: null, blockedUntil: 0, hostState: null, nowMs: NOW_MS } as never);
    assert.equal(plan.kind, 'record');
    assert.match(JSON.stringify(plan), /forward URL disabled/);
  });
});

describe('destination health: the organization setting', () => {
  const org = { id: ORG, name: 'o', plan: 'free' as const, webhook_secret: 's', notification_email: null, notification_webhook_url: null, notify_on_failure: true, notify_on_recovery: true, created_at: later(0), updated_at: later(0) };
  test('default 5d, scaled; null never; a bad duration is 422 naming auto_disable_after', () => {
    assert.equal(autoDisableAfterMs({}, (ms) => ms), 5 * 24 * HOUR, 'absent: the default');
    assert.equal(autoDisableAfterMs({ auto_disable_after: '2h' }, (ms) => ms / 100), 2 * HOUR / 100);
    assert.equal(autoDisableAfterMs({ auto_disable_after: null }, (ms) => ms), null);
    for (const bad of ['5 days', '-1d', 'd', '99999d']) {
      assert.throws(() => decideOrganization({ type: 'UpdateSettings', settings: { auto_disable_after: bad } }, org, meta()), (err: { status: number; field: string }) => err.status === 422 && err.field === 'auto_disable_after', bad);
    }
    const [e] = decideOrganization({ type: 'UpdateSettings', settings: { auto_disable_after: null } }, org, meta());
    assert.equal((e!.data as { organization: { auto_disable_after: unknown } }).organization.auto_disable_after, null);
  });
});
