import { describe, test } from 'node:test';
import { decideMonitor, evolveMonitor, type MonitorCommand } from '../../src/commands/monitor/decide.ts';
import type { Monitor, MonitorEvent, PingRecord } from '../../src/commands/monitor/types.ts';
import { deciderSpec, later, meta, NOW, NOW_MS } from './spec.ts';

const spec = deciderSpec(decideMonitor, evolveMonitor);
const ORG = 'org_mon';
const MINUTE = 60_000;

const decide = (command: MonitorCommand, state: Monitor | null, now = NOW) => decideMonitor(command, state, meta(now));
const created = decide({ type: 'CreateMonitor', orgId: ORG, input: { name: 'backup', schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 300 } }, null);
const fresh = spec.stateAfter(created)!;
const ping = (receivedAt: string, kind: PingRecord['kind'] = 'ping'): MonitorCommand => ({
  type: 'Ping',
  ping: { id: `png_${receivedAt}`, received_at: receivedAt, kind, method: 'GET', source_ip: null, user_agent: null, body: '' },
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
      .thenMatches([{ type: 'MonitorWentDown', data: { reason: 'fail_signal', monitor: { status: 'down', last_ping_at: later(MINUTE), deadline_at: null } } }]);
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
      data: { monitor: { ...up, status: 'down', deadline_at: null, updated_at: at }, reason: 'missed' },
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
