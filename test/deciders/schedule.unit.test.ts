import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideSchedule, evolveSchedule, tickExecutionId } from '../../src/commands/schedule/decide.ts';
import { SCHEDULE_DEFAULTS, type Schedule, type ScheduleEvent } from '../../src/commands/schedule/types.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideSchedule, evolveSchedule);
const ORG = 'org_sched';
const URL = 'https://example.com/job';
const HOURLY = '0 * * * *';
const ONE_PM = '2026-03-01T13:00:00.000Z';
const TWO_PM = '2026-03-01T14:00:00.000Z';

const create = (input: Partial<Schedule> = {}) =>
  decideSchedule({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: URL, cron: HOURLY, ...input } }, null, meta());
const created = create();
const schedule = spec.stateAfter(created)!;
const tick = (tickAt: string, now: string) => decideSchedule({ type: 'RecordTick', tickAt }, schedule, meta(now));

describe('schedule decider: create and change', () => {
  test('create: defaults, name from the URL, the next tick in the schedule zone', () => {
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: URL, cron: HOURLY } }).then([{
      type: 'ScheduleCreated',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: { schedule: { ...SCHEDULE_DEFAULTS, name: 'example.com/job', url: URL, cron: HOURLY, id: 'sch_1', org_id: ORG, created_at: NOW, updated_at: NOW, next_run_at: ONE_PM } },
    }]);
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: URL, cron: '0 9 * * *', timezone: 'Asia/Tokyo' } })
      .thenMatches([{ data: { schedule: { next_run_at: '2026-03-02T00:00:00.000Z' } } }]);
  });

  test('create disabled: no next tick', () => {
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: URL, cron: HOURLY, enabled: false } })
      .thenMatches([{ data: { schedule: { enabled: false, next_run_at: null } } }]);
  });

  test('422 naming cron or timezone; a script on Free is 403 before them', () => {
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: { url: URL, cron: '61 * * * *' } }).thenRefuses({ status: 422, field: 'cron' });
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: { url: URL, cron: '@fortnightly' } }).thenRefuses({ status: 422, field: 'cron' });
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: { url: URL, cron: HOURLY, timezone: 'Mars/Olympus' } }).thenRefuses({ status: 422, field: 'timezone' });
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'free', input: { url: URL, cron: '61 * * * *', script: 'x = 1' } }).thenRefuses({ status: 403, field: 'script' });
    spec.given([]).when({ type: 'CreateSchedule', orgId: ORG, plan: 'pro', input: { url: URL, cron: HOURLY, script: 'x = 1' } }).thenMatches([{ data: { schedule: { script: 'x = 1' } } }]);
  });

  test('update: a new cron moves the next tick; another field keeps it', () => {
    spec.given(created).when({ type: 'UpdateSchedule', plan: 'free', input: { cron: '30 * * * *' } })
      .thenMatches([{ type: 'ScheduleUpdated', data: { schedule: { cron: '30 * * * *', next_run_at: '2026-03-01T12:30:00.000Z' }, changed: ['cron'] } }]);
    spec.given(created).when({ type: 'UpdateSchedule', plan: 'free', input: { name: 'renamed' } }, meta(later(90 * 60_000)))
      .thenMatches([{ data: { schedule: { name: 'renamed', next_run_at: ONE_PM }, changed: ['name'] } }]);
    spec.given(created).when({ type: 'UpdateSchedule', plan: 'free', input: { enabled: false } }).thenMatches([{ data: { schedule: { next_run_at: null } } }]);
  });

  test('update: 404 for no schedule, but a script on Free is refused first', () => {
    spec.given([]).when({ type: 'UpdateSchedule', plan: 'pro', input: { name: 'x' } }).thenRefuses({ status: 404, message: 'Schedule not found' });
    spec.given([]).when({ type: 'UpdateSchedule', plan: 'free', input: { script: 'x = 1' } }).thenRefuses({ status: 403, field: 'script' });
  });

  test('trigger: an execution due now; delete: gone, then 404', () => {
    spec.given(created).when({ type: 'TriggerSchedule', callbackUrl: null })
      .then([{ type: 'ScheduleTriggered', id: 'evt_test', at: NOW, org_id: ORG, data: { schedule, execution: { id: 'exe_1', scheduled_for: NOW, callback_url: null } } }]);
    const deleted = decideSchedule({ type: 'DeleteSchedule' }, schedule, meta());
    spec.given([...created, ...deleted]).when({ type: 'TriggerSchedule', callbackUrl: null }).thenRefuses({ status: 404 });
    spec.given([...created, ...deleted]).when({ type: 'DeleteSchedule' }).thenRefuses({ status: 404 });
  });
});

describe('schedule decider: ticks (the scheduler)', () => {
  test('the due tick: one ScheduleTicked, id and execution id derived from the tick, next tick armed', () => {
    const next = { ...schedule, next_run_at: TWO_PM };
    spec.given(created).when({ type: 'RecordTick', tickAt: ONE_PM }, meta('2026-03-01T13:00:00.250Z')).then([{
      type: 'ScheduleTicked',
      id: `sch_1.tick.${ONE_PM}`,
      at: '2026-03-01T13:00:00.250Z',
      org_id: ORG,
      data: { schedule: next, execution: { id: tickExecutionId('sch_1', ONE_PM), scheduled_for: ONE_PM, callback_url: null }, next_run_at: TWO_PM },
    }]);
  });

  test('missed ticks: only the latest tick due by now runs, under its own time; the ones before it are counted in missed_ticks', () => {
    // Armed for 13:00, recorded at 17:20: 13:00 … 16:00 are skipped, 17:00 runs (20 min late, under an hour).
    const at = '2026-03-01T17:20:00.000Z';
    const SEVENTEEN = '2026-03-01T17:00:00.000Z';
    spec.given(created).when({ type: 'RecordTick', tickAt: ONE_PM }, meta(at)).then([{
      type: 'ScheduleTicked',
      id: `sch_1.tick.${SEVENTEEN}`,
      at,
      org_id: ORG,
      data: {
        schedule: { ...schedule, next_run_at: '2026-03-01T18:00:00.000Z', missed_ticks: 4 },
        execution: { id: tickExecutionId('sch_1', SEVENTEEN), scheduled_for: SEVENTEEN, callback_url: null },
        next_run_at: '2026-03-01T18:00:00.000Z',
        missed: 4,
      },
    }]);
    // Counts add up over outages.
    const first = decideSchedule({ type: 'RecordTick', tickAt: ONE_PM }, schedule, meta(at));
    const after = spec.stateAfter([...created, ...first])!;
    spec.given([...created, ...first]).when({ type: 'RecordTick', tickAt: after.next_run_at! }, meta('2026-03-01T20:30:00.000Z'))
      .thenMatches([{ data: { execution: { scheduled_for: '2026-03-01T20:00:00.000Z' }, schedule: { missed_ticks: 6 }, missed: 2 } }]);
  });

  test('missed ticks: a tick recorded a little late (no newer one due) runs, nothing is counted', () => {
    spec.given(created).when({ type: 'RecordTick', tickAt: ONE_PM }, meta('2026-03-01T13:40:00.000Z'))
      .thenMatches([{ data: { execution: { scheduled_for: ONE_PM }, next_run_at: TWO_PM, schedule: { next_run_at: TWO_PM } } }]);
    const [e] = decideSchedule({ type: 'RecordTick', tickAt: ONE_PM }, schedule, meta('2026-03-01T13:40:00.000Z'));
    assert.equal((e!.data as { missed?: number }).missed, undefined);
    assert.equal(e!.data.schedule.missed_ticks, undefined);
  });

  test('missed ticks: when even the latest due tick is an hour late or more, none runs and all are counted', () => {
    const daily = spec.stateAfter(create({ cron: '0 9 * * *' }))!;
    const NINE = daily.next_run_at!;
    // Two days later at 10:30: three 09:00 ticks due, the latest 1.5 h ago.
    const now = new Date(Date.parse(NINE) + 2 * 86_400_000 + 90 * 60_000).toISOString();
    spec.givenState(daily).when({ type: 'RecordTick', tickAt: NINE }, meta(now)).then([{
      type: 'ScheduleTicksMissed',
      id: `sch_1.missed.${NINE}`,
      at: now,
      org_id: ORG,
      data: { schedule: { ...daily, next_run_at: new Date(Date.parse(NINE) + 3 * 86_400_000).toISOString(), missed_ticks: 3 }, missed: 3, next_run_at: new Date(Date.parse(NINE) + 3 * 86_400_000).toISOString() },
    }]);
  });

  test('missed ticks: a per-second schedule down for days is counted up to a bound and its latest tick still runs', () => {
    const everySecond = spec.stateAfter(create({ cron: '* * * * * *' }))!;
    const from = everySecond.next_run_at!;
    const now = new Date(Date.parse(from) + 3 * 86_400_000 + 400).toISOString();
    const [e] = decideSchedule({ type: 'RecordTick', tickAt: from }, everySecond, meta(now));
    assert.equal(e!.type, 'ScheduleTicked');
    assert.equal((e!.data as { execution: { scheduled_for: string } }).execution.scheduled_for, new Date(Date.parse(from) + 3 * 86_400_000).toISOString());
    assert.equal(e!.data.schedule.missed_ticks, 100_000);
  });

  test('no event when the tick is no longer the next one', () => {
    const ticked: ScheduleEvent[] = tick(ONE_PM, ONE_PM);
    // Fired again (a second scheduler, a replayed timer): already recorded.
    spec.given([...created, ...ticked]).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
    // Updated meanwhile: the cron moved the next tick.
    const moved = decideSchedule({ type: 'UpdateSchedule', plan: 'free', input: { cron: '30 * * * *' } }, schedule, meta());
    spec.given([...created, ...moved]).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
    // Disabled, deleted, or never there.
    const disabled = decideSchedule({ type: 'UpdateSchedule', plan: 'free', input: { enabled: false } }, schedule, meta());
    spec.given([...created, ...disabled]).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
    spec.givenState({ ...schedule, enabled: false }).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
    spec.given([...created, ...decideSchedule({ type: 'DeleteSchedule' }, schedule, meta())]).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
    spec.given([]).when({ type: 'RecordTick', tickAt: ONE_PM }).thenNothing();
  });

  test('the next tick after a recorded one is recorded in turn', () => {
    spec.given([...created, ...tick(ONE_PM, ONE_PM)]).when({ type: 'RecordTick', tickAt: TWO_PM }, meta(TWO_PM))
      .thenMatches([{ id: `sch_1.tick.${TWO_PM}`, data: { next_run_at: '2026-03-01T15:00:00.000Z' } }]);
  });
});
