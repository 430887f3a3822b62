import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideMonitor, evolveMonitor, type MonitorCommand } from '../../src/commands/monitor/decide.ts';
import type { Monitor, MonitorEvent } from '../../src/commands/monitor/types.ts';
import { armedDeadline } from '../../src/commands/monitor/runs.ts';
import { upcast } from '../../src/commands/upcast.ts';
import { assertMatches, deciderSpec, later, meta, NOW, NOW_MS } from './spec.ts';

const spec = deciderSpec(decideMonitor, evolveMonitor);
const ORG = 'org_mon';
const MINUTE = 60_000;

const decide = (command: MonitorCommand, state: Monitor | null, now = NOW) => decideMonitor(command, state, meta(now));
const created = decide({ type: 'CreateMonitor', orgId: ORG, input: { name: 'backup', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 300 } }, null);
const fresh = spec.stateAfter(created)!;
const ping = (receivedAt: string, suffix: string | null = null, rid: string | null = null): MonitorCommand => ({
  type: 'Ping',
  ping: { id: `png_${receivedAt}`, received_at: receivedAt, suffix, rid, method: 'POST', source_ip: null, user_agent: null, body: '' },
});
// Up after a ping at NOW: next expected in an hour, down 5 minutes after that.
const pinged: MonitorEvent[] = [...created, ...decide(ping(NOW), fresh)];
const up = spec.stateAfter(pinged)!;
const DEADLINE = later(65 * MINUTE);

describe('monitor decider: create and change', () => {
  test('create: a new monitor waits for its first ping (no deadline yet)', () => {
    spec.given([]).when({ type: 'CreateMonitor', orgId: ORG, input: { name: 'backup', schedule_type: 'interval', interval_seconds: 3600 } }).thenMatches([{
      type: 'MonitorCreated',
      org_id: ORG,
      data: { monitor: { id: 'mon_1', status: 'new', paused: false, grace_period_seconds: 300, last_ping_at: null, next_expected_at: null, deadline_at: null } },
    }]);
  });

  for (const [name, input, field] of [
    ['an interval monitor without interval_seconds', { schedule_type: 'interval' }, 'interval_seconds'],
    ['a cron monitor without cron_expression', { schedule_type: 'cron' }, 'cron_expression'],
    ['a bad cron expression', { schedule_type: 'cron', cron_expression: 'every day' }, 'cron_expression'],
    ['an unknown time zone', { schedule_type: 'cron', cron_expression: '@daily', timezone: 'Nowhere/Land' }, 'timezone'],
  ] as const) {
    test(`422: ${name}`, () => {
      spec.given([]).when({ type: 'CreateMonitor', orgId: ORG, input: { name: 'm', ...input } }).thenRefuses({ status: 422, field });
    });
  }

  test('update: a new interval applies from the last ping', () => {
    spec.given(pinged).when({ type: 'UpdateMonitor', input: { interval_seconds: 600 } }, meta(later(MINUTE)))
      .thenMatches([{ type: 'MonitorUpdated', data: { monitor: { interval_seconds: 600, next_expected_at: later(10 * MINUTE), deadline_at: later(15 * MINUTE) }, changed: ['interval_seconds'] } }]);
  });

  test('pause clears the deadline; resume waits a whole interval from now (new again if never pinged)', () => {
    const paused = decide({ type: 'PauseMonitor' }, up);
    spec.given(pinged).when({ type: 'PauseMonitor' }).thenMatches([{ type: 'MonitorPaused', data: { monitor: { paused: true, status: 'paused', deadline_at: null } } }]);
    spec.given([...pinged, ...paused]).when({ type: 'ResumeMonitor' }, meta(later(3 * 3_600_000)))
      .thenMatches([{ type: 'MonitorResumed', data: { monitor: { paused: false, status: 'up', next_expected_at: later(4 * 3_600_000), deadline_at: later(4 * 3_600_000 + 5 * MINUTE) } } }]);
    spec.given([...created, ...decide({ type: 'PauseMonitor' }, fresh)]).when({ type: 'ResumeMonitor' })
      .thenMatches([{ data: { monitor: { status: 'new', next_expected_at: null, deadline_at: null } } }]);
  });

  test('delete: gone, then 404', () => {
    const deleted = decide({ type: 'DeleteMonitor' }, up);
    spec.given(pinged).when({ type: 'DeleteMonitor' }).thenMatches([{ type: 'MonitorDeleted' }]);
    spec.given([...pinged, ...deleted]).when(ping(NOW)).thenRefuses({ status: 404, message: 'Monitor not found' });
  });
});

describe('monitor decider: pings', () => {
  test('a ping: up, the next expected one interval later, the deadline grace after that', () => {
    spec.given(created).when(ping(NOW)).thenMatches([{
      type: 'MonitorPinged',
      data: { monitor: { status: 'up', last_ping_at: NOW, next_expected_at: later(60 * MINUTE), deadline_at: DEADLINE }, previous_status: 'new' },
    }]);
  });

  test('a fail signal: down at once, no deadline', () => {
    spec.given(pinged).when(ping(later(MINUTE), 'fail'))
      .thenMatches([{ type: 'MonitorWentDown', data: { reason: 'failed', monitor: { status: 'down', down_reason: 'failed', last_ping_at: later(MINUTE), deadline_at: null } } }]);
  });

  test('pings decided out of arrival order: the latest counts', () => {
    spec.given(pinged).when(ping(later(-MINUTE))).thenMatches([{ data: { monitor: { last_ping_at: NOW, deadline_at: DEADLINE } } }]);
  });

  test('paused or disabled: 410', () => {
    spec.givenState({ ...up, paused: true }).when(ping(NOW)).thenRefuses({ status: 410 });
    spec.givenState({ ...up, enabled: false }).when(ping(NOW)).thenRefuses({ status: 410 });
  });

  test('interval and grace are service-counted waits: scaled', () => {
    spec.given(created).when(ping(NOW), meta(NOW, 0.001))
      .thenMatches([{ data: { monitor: { next_expected_at: new Date(NOW_MS + 3600).toISOString(), deadline_at: new Date(NOW_MS + 3900).toISOString() } } }]);
  });
});

describe('monitor decider: deadlines (the scheduler)', () => {
  test('the current deadline passed: down, missed, with an id derived from the deadline', () => {
    const at = later(65 * MINUTE + 20);
    spec.given(pinged).when({ type: 'CheckDeadline', deadlineAt: DEADLINE }, meta(at)).then([{
      type: 'MonitorWentDown',
      id: `mon_1.down.${DEADLINE}`,
      at,
      org_id: ORG,
      data: { monitor: { ...up, status: 'down', down_reason: 'missed', deadline_at: null, updated_at: at }, reason: 'missed' },
    }]);
  });

  test('no event when the deadline is no longer current', () => {
    const check: MonitorCommand = { type: 'CheckDeadline', deadlineAt: DEADLINE };
    // A later ping moved it.
    spec.given([...pinged, ...decide(ping(later(30 * MINUTE)), up)]).when(check).thenNothing();
    // Paused, down already (fail signal, or this deadline recorded by another scheduler), never pinged, deleted, absent.
    spec.given([...pinged, ...decide({ type: 'PauseMonitor' }, up)]).when(check).thenNothing();
    spec.given([...pinged, ...decide(ping(later(MINUTE), 'fail'), up)]).when(check).thenNothing();
    spec.given([...pinged, ...decide(check, up, later(66 * MINUTE))]).when(check).thenNothing();
    spec.given(created).when(check).thenNothing();
    spec.givenState({ ...up, enabled: false }).when(check).thenNothing();
    spec.given([...pinged, ...decide({ type: 'DeleteMonitor' }, up)]).when(check).thenNothing();
    spec.given([]).when(check).thenNothing();
  });
});

describe('monitor decider: heartbeats (Healthchecks signals, runs, durations)', () => {
  const RID_A = '11111111-1111-4111-8111-111111111111';
  const RID_B = '22222222-2222-4222-8222-222222222222';
  const limited = spec.stateAfter([...pinged, ...decide({ type: 'UpdateMonitor', input: { max_duration_seconds: 600, min_duration_seconds: 30 } }, up)])!;
  const after = (events: MonitorEvent[]) => spec.stateAfter(events)!;
  const run = (state: Monitor, ...steps: Array<[string, MonitorCommand]>) => {
    let s = state;
    const out: MonitorEvent[] = [];
    for (const [at, c] of steps) {
      const events = decide(c, s, at);
      out.push(...events);
      s = after([{ type: 'MonitorCreated', id: 'x', at, org_id: ORG, data: { monitor: s } }, ...events]);
    }
    return { state: s, events: out };
  };

  test('each suffix: its kind and exit status; above 255 and a rid that is not a UUID are 400, another word 404', () => {
    for (const [suffix, kind, exit_status] of [[null, 'success', null], ['start', 'start', null], ['fail', 'fail', null], ['log', 'log', null], ['0', 'exit', 0], ['255', 'exit', 255]] as const) {
      const [e] = decide(ping(later(MINUTE), suffix), up);
      assert.equal((e!.data as { ping: { kind: string } }).ping.kind, kind, String(suffix));
      assert.equal((e!.data as { ping: { exit_status: number | null } }).ping.exit_status, exit_status);
    }
    spec.givenState(up).when(ping(NOW, '256')).thenRefuses({ status: 400 });
    spec.givenState(up).when(ping(NOW, null, 'not-a-uuid')).thenRefuses({ status: 400, field: 'rid' });
    spec.givenState(up).when(ping(NOW, 'restart')).thenRefuses({ status: 404 });
  });

  test('/log records and changes nothing; /start opens a run (limit = start + max_duration) and moves the deadline to it', () => {
    spec.givenState(up).when(ping(later(MINUTE), 'log')).thenMatches([{ type: 'MonitorPinged', data: { monitor: up, ping: { kind: 'log' } } }]);
    spec.givenState(limited).when(ping(later(MINUTE), 'start', RID_A)).thenMatches([{
      type: 'MonitorPinged',
      data: { monitor: { status: 'up', last_ping_at: NOW, runs: [{ rid: RID_A, started_at: later(MINUTE), limit_at: later(11 * MINUTE), overdue: false }], deadline_at: later(11 * MINUTE) } },
    }]);
  });

  test('an end closes its own start by rid: two overlapping runs each timed right', () => {
    const { events } = run(limited,
      [later(MINUTE), ping(later(MINUTE), 'start', RID_A)],
      [later(2 * MINUTE), ping(later(2 * MINUTE), 'start', RID_B)],
      [later(3 * MINUTE), ping(later(3 * MINUTE), '0', RID_A)],
      [later(7 * MINUTE), ping(later(7 * MINUTE), null, RID_B)]);
    assertMatches(events.map((e) => (e.data as { ping: unknown }).ping), [
      { kind: 'start', rid: RID_A, duration_ms: null },
      { kind: 'start', rid: RID_B, duration_ms: null },
      { kind: 'exit', exit_status: 0, rid: RID_A, duration_ms: 2 * MINUTE },
      { kind: 'success', rid: RID_B, duration_ms: 5 * MINUTE },
    ]);
    assert.deepEqual(after([{ ...events.at(-1)! }]).runs, []);
  });

  test('without rid an end closes the latest open start; an end whose rid matches nothing closes nothing', () => {
    const { events, state } = run(limited,
      [later(MINUTE), ping(later(MINUTE), 'start', RID_A)],
      [later(2 * MINUTE), ping(later(2 * MINUTE), 'start')],
      [later(4 * MINUTE), ping(later(4 * MINUTE))],
      [later(5 * MINUTE), ping(later(5 * MINUTE), null, RID_B)]);
    assertMatches(events.slice(2).map((e) => (e.data as { ping: unknown }).ping), [{ duration_ms: 2 * MINUTE }, { duration_ms: null }]);
    assertMatches(state.runs, [{ rid: RID_A }]);
  });

  test('exit status 0 is a success, non-zero takes the monitor down with exit_status; /fail with failed', () => {
    spec.givenState(up).when(ping(later(MINUTE), '0')).thenMatches([{ type: 'MonitorPinged', data: { monitor: { status: 'up', down_reason: null } } }]);
    spec.givenState(up).when(ping(later(MINUTE), '3')).thenMatches([{ type: 'MonitorWentDown', data: { reason: 'exit_status', monitor: { status: 'down', down_reason: 'exit_status' }, ping: { exit_status: 3 } } }]);
  });

  test('too fast: a success faster than min_duration takes the monitor down; a slower one is up', () => {
    const started = run(limited, [later(MINUTE), ping(later(MINUTE), 'start', RID_A)]).state;
    spec.givenState(started).when(ping(later(MINUTE + 10_000), '0', RID_A), meta(later(MINUTE + 10_000)))
      .thenMatches([{ type: 'MonitorWentDown', data: { reason: 'too_fast', monitor: { down_reason: 'too_fast', runs: [] }, ping: { duration_ms: 10_000 } } }]);
    spec.givenState(started).when(ping(later(MINUTE + 40_000), '0', RID_A), meta(later(MINUTE + 40_000)))
      .thenMatches([{ type: 'MonitorPinged', data: { monitor: { status: 'up' }, ping: { duration_ms: 40_000 } } }]);
  });

  test('too long: the run limit fires before being late, the run is marked overdue, and its late end still gets a duration and recovers', () => {
    const started = run(limited, [later(MINUTE), ping(later(MINUTE), 'start', RID_A)]).state;
    const [down] = spec.givenState(started).when({ type: 'CheckDeadline', deadlineAt: later(11 * MINUTE) }, meta(later(11 * MINUTE))).thenMatches([{
      type: 'MonitorWentDown',
      data: { reason: 'too_long', run: { rid: RID_A }, monitor: { status: 'down', down_reason: 'too_long', deadline_at: null, runs: [{ rid: RID_A, overdue: true }] } },
    }]);
    const downState = after([down!]);
    spec.givenState(downState).when(ping(later(20 * MINUTE), '0', RID_A), meta(later(20 * MINUTE)))
      .thenMatches([{ type: 'MonitorPinged', data: { previous_status: 'down', monitor: { status: 'up', down_reason: null, runs: [] }, ping: { duration_ms: 19 * MINUTE } } }]);
  });

  test('a new monitor: a start stays new but its run can be too long (unset max_duration: grace)', () => {
    spec.givenState(fresh).when(ping(NOW, 'start')).thenMatches([{ data: { monitor: { status: 'new', deadline_at: later(5 * MINUTE) } } }]);
    const started = run(fresh, [NOW, ping(NOW, 'start')]).state;
    spec.givenState(started).when({ type: 'CheckDeadline', deadlineAt: later(5 * MINUTE) }, meta(later(5 * MINUTE)))
      .thenMatches([{ type: 'MonitorWentDown', data: { reason: 'too_long' } }]);
    // A start and a log line on a down monitor leave it down (no recovery).
    const down = after(decide(ping(NOW, 'fail'), up));
    spec.givenState(down).when(ping(later(MINUTE), 'start')).thenMatches([{ type: 'MonitorPinged', data: { monitor: { status: 'down', down_reason: 'failed', deadline_at: null } } }]);
  });

  test('rules: slug pattern and uniqueness, min below max', () => {
    spec.given([]).when({ type: 'CreateMonitor', orgId: ORG, input: { name: 'm', schedule_type: 'interval', interval_seconds: 60, slug: 'Bad Slug' } }).thenRefuses({ status: 422, field: 'slug' });
    spec.given([]).when({ type: 'CreateMonitor', orgId: ORG, input: { name: 'm', schedule_type: 'interval', interval_seconds: 60, slug: 'db' }, slugOwner: 'mon_other' }).thenRefuses({ status: 422, field: 'slug' });
    spec.givenState(up).when({ type: 'UpdateMonitor', input: { slug: 'db' }, slugOwner: up.id }).thenMatches([{ data: { monitor: { slug: 'db' } } }]);
    spec.givenState(up).when({ type: 'UpdateMonitor', input: { min_duration_seconds: 60, max_duration_seconds: 60 } }).thenRefuses({ status: 422, field: 'min_duration_seconds' });
    // A ping by a slug the monitor no longer has: not found.
    spec.givenState({ ...up, slug: 'new-name' }).when({ ...ping(NOW), slug: 'old-name' } as MonitorCommand).thenRefuses({ status: 404 });
  });

  test('events written before heartbeats: read with no runs, late_at = deadline_at, fail_signal = failed, a key-like sync_key as slug', () => {
    const { runs: _r, late_at: _l, down_reason: _d, max_duration_seconds: _x, min_duration_seconds: _n, slug: _s, ...old } = up;
    const legacy = { ...old, sync_key: 'nightly-db' } as unknown as Monitor;
    // As every reader gets them: through the one upcaster (src/commands/upcast.ts).
    const state = evolveMonitor(null, upcast({ type: 'MonitorPinged', id: 'e', at: NOW, org_id: ORG, data: { monitor: legacy, ping: { kind: 'ping' }, previous_status: 'new' } }) as MonitorEvent)!;
    assertMatches(state, { runs: [], late_at: DEADLINE, deadline_at: DEADLINE, down_reason: null, slug: 'nightly-db', max_duration_seconds: null });
    const wentDown = evolveMonitor(null, upcast({ type: 'MonitorWentDown', id: 'e', at: NOW, org_id: ORG, data: { monitor: { ...legacy, status: 'down', deadline_at: null }, reason: 'fail_signal' } }) as MonitorEvent)!;
    assert.equal(wentDown.down_reason, 'failed');
    spec.givenState(state).when({ type: 'CheckDeadline', deadlineAt: DEADLINE }, meta(DEADLINE)).thenMatches([{ data: { reason: 'missed' } }]);
  });
});

describe('monitor deadlines: which states the deadline keeper watches', () => {
  test('up (late at its deadline) or a run open; not new, down, paused or deleted', () => {
    const started = spec.stateAfter([...created, ...decide(ping(NOW, 'start'), fresh)])!;
    const byDeadline = spec.stateAfter([...pinged, ...decide({ type: 'CheckDeadline', deadlineAt: DEADLINE }, up, DEADLINE)]);
    const failed = spec.stateAfter([...pinged, ...decide(ping(later(MINUTE), 'fail'), up)]);
    const paused = spec.stateAfter([...pinged, ...decide({ type: 'PauseMonitor' }, up)]);
    const deleted = spec.stateAfter([...pinged, ...decide({ type: 'DeleteMonitor' }, up)]);
    assert.deepEqual([up, started].map(armedDeadline), [DEADLINE, started.runs[0]!.limit_at]);
    assert.deepEqual([fresh, byDeadline, failed, paused, deleted].map(armedDeadline), [null, null, null, null, null]);
  });
});
