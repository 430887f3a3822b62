import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commitMessage, eventsOf } from '../src/commands/commit.ts';
import { eventJson, storedEvent, upcast, versionOf } from '../src/commands/upcast.ts';

const at = '2026-11-20T10:00:00.000Z';
/** A monitor as events before heartbeats carried it: no runs, durations, slug, down_reason or late_at. */
const oldMonitor = {
  id: 'mon_1', org_id: 'org_1', token: 'pm_x', name: 'backup', schedule_type: 'interval', interval_seconds: 3600, cron_expression: null, timezone: 'UTC',
  grace_period_seconds: 300, enabled: true, notify_on_failure: null, notify_on_recovery: null, on_failure_url: null, on_recovery_url: null,
  sync_key: 'nightly-backup', status: 'up', paused: false, last_ping_at: at, next_expected_at: at, deadline_at: at, created_at: at, updated_at: at,
};
const oldPing = { id: 'png_1', received_at: at, kind: 'ping', method: 'GET', source_ip: null, user_agent: null, body: '' };
const event = (type: string, data: object, v?: number) => ({ type, id: `e_${type}`, at, org_id: 'org_1', data, ...(v === undefined ? {} : { v }) });

test('an event stored before versions reads as version 1 in today\'s shape: pings of kind ping are successes, fail_signal is failed', () => {
  const pinged = upcast(event('MonitorPinged', { monitor: oldMonitor, ping: oldPing, previous_status: 'new' })) as any;
  assert.equal(pinged.v, 1);
  assert.deepEqual([pinged.data.ping.kind, pinged.data.ping.exit_status, pinged.data.ping.rid, pinged.data.ping.duration_ms], ['success', null, null, null]);
  assert.deepEqual([pinged.data.monitor.runs, pinged.data.monitor.late_at, pinged.data.monitor.slug, pinged.data.monitor.down_reason], [[], at, 'nightly-backup', null]);

  const down = upcast(event('MonitorWentDown', { monitor: { ...oldMonitor, status: 'down' }, reason: 'fail_signal', ping: { ...oldPing, kind: 'fail' } })) as any;
  assert.deepEqual([down.data.reason, down.data.monitor.down_reason, down.data.ping.kind], ['failed', 'failed', 'fail']);
  const missed = upcast(event('MonitorUpdated', { monitor: { ...oldMonitor, status: 'down' }, changed: [] })) as any;
  assert.equal(missed.data.monitor.down_reason, 'missed', 'an old event that is not the going down did not say why: missed');
});

test('an event at today\'s version is handed on as it is (no copy); a newer or a broken version is refused', () => {
  const today = event('TaskDeleted', { task: { id: 'tsk_1' } }, 1);
  assert.equal(upcast(today), today);
  assert.throws(() => upcast(event('TaskDeleted', {}, 99)), /version 99; this build knows up to version 1/);
  assert.throws(() => upcast(event('TaskDeleted', {}, 0)), /bad version/);
  // An unversioned event that is today's shape already is today's (only `v` added).
  const monitor = { ...oldMonitor, runs: [], late_at: at, slug: null, down_reason: null, max_duration_seconds: null, min_duration_seconds: null };
  assert.deepEqual((upcast(event('MonitorPaused', { monitor })) as any).data.monitor, monitor);
});

test('every appender\'s form carries v: one event, a commit, an event given as text; the decoding seam upcasts a commit\'s events', () => {
  assert.equal(storedEvent(event('TaskDeleted', {})).v, versionOf('TaskDeleted'));
  assert.equal(JSON.parse(eventJson(event('TaskDeleted', {}))).v, 1);
  assert.equal(eventJson(event('TaskDeleted', {}, 1)), JSON.stringify(event('TaskDeleted', {}, 1)));
  assert.deepEqual(commitMessage('c', [event('TaskDeleted', {}) as any], new Date()).events.map((e) => e.v), [1]);
  const read = eventsOf<any>(JSON.parse(JSON.stringify({ type: 'Commit', id: 'c', at, events: [event('MonitorPinged', { monitor: oldMonitor, ping: oldPing, previous_status: 'up' })] })));
  assert.equal(read[0].data.ping.kind, 'success');
  assert.equal(eventsOf<any>(event('MonitorWentDown', { monitor: oldMonitor, reason: 'fail_signal' }))[0].data.reason, 'failed');
});

test('AttemptFinished version 1 (no `final`) reads as version 2: final when no other attempt follows', () => {
  const base = { type: 'AttemptFinished', id: 'exe_1.1.finished', at: '2026-12-06T12:00:00.000Z', org_id: 'org_1' };
  const data = (next: string | null) => ({ execution_id: 'exe_1', attempt: 1, status: 'failed', next_attempt_at: next });
  const last = upcast({ ...base, data: data(null) } as never) as { v: number; data: { final: boolean } };
  const retried = upcast({ ...base, v: 1, data: data('2026-12-06T12:02:00.000Z') } as never) as { v: number; data: { final: boolean } };
  assert.deepEqual([last.v, last.data.final], [2, true]);
  assert.deepEqual([retried.v, retried.data.final], [2, false]);
  // Today's version passes as it is.
  const today = { ...base, v: 2, data: { ...data(null), final: true } };
  assert.equal(upcast(today as never), today);
});

test('RetryJobStepped version 1 (one execution beside `job`) reads as version 2: a group of one step', () => {
  const job = { id: 'rjb_1', position: 1 };
  const old = upcast(event('RetryJobStepped', { job, execution_id: 'exe_1', outcome: 'skipped', retry_id: null, reason: 'already retried' }, 1) as never) as { v: number; data: unknown };
  assert.deepEqual([old.v, old.data], [2, { job, steps: [{ execution_id: 'exe_1', outcome: 'skipped', retry_id: null, reason: 'already retried' }] }]);
  assert.equal(versionOf('RetryJobStepped'), 2);
});
