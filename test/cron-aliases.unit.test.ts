import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkMonitorRules, expectation } from '../src/commands/monitor/decide.ts';
import { MONITOR_DEFAULTS, type MonitorSpec } from '../src/commands/monitor/types.ts';
import { CRON_ALIASES, cronError } from '../src/commands/schedule/cron.ts';
import { checkScheduleRules, nextRunAt } from '../src/commands/schedule/decide.ts';
import { SCHEDULE_DEFAULTS, type ScheduleSpec } from '../src/commands/schedule/types.ts';

// Friday 2024-03-15 10:20:30 UTC: the aliases' next ticks all differ from it.
const AFTER = Date.parse('2024-03-15T10:20:30Z');
const EXPECTED: Record<string, string> = {
  '@yearly': '2025-01-01T00:00:00.000Z',
  '@annually': '2025-01-01T00:00:00.000Z',
  '@monthly': '2024-04-01T00:00:00.000Z',
  '@weekly': '2024-03-17T00:00:00.000Z',
  '@daily': '2024-03-16T00:00:00.000Z',
  '@midnight': '2024-03-16T00:00:00.000Z',
  '@hourly': '2024-03-15T11:00:00.000Z',
};

const schedule = (cron: string, timezone = 'UTC'): ScheduleSpec => ({ ...SCHEDULE_DEFAULTS, name: 's', url: 'http://example.com/', cron, timezone });
const monitor = (cron: string): MonitorSpec => ({ ...MONITOR_DEFAULTS, name: 'm', schedule_type: 'cron', cron_expression: cron });

describe('cron aliases of the contract', () => {
  test("the list is exactly the contract's", () => {
    assert.deepEqual(Object.keys(CRON_ALIASES).sort(), Object.keys(EXPECTED).sort());
  });

  for (const [alias, next] of Object.entries(EXPECTED)) {
    test(`${alias}: schedules and cron monitors accept it; next tick ${next}`, () => {
      assert.equal(cronError(alias), null);
      assert.equal(cronError(` ${alias.toUpperCase()} `), null, 'case and surrounding spaces do not matter');
      assert.doesNotThrow(() => checkScheduleRules(schedule(alias)));
      assert.equal(nextRunAt({ cron: alias, timezone: 'UTC', enabled: true }, AFTER), next);
      assert.doesNotThrow(() => checkMonitorRules(monitor(alias)));
      assert.equal(expectation(monitor(alias), AFTER, { scaleWait: (ms) => ms }).next, next);
    });
  }

  test('an alias follows the time zone: @midnight in New York', () => {
    assert.equal(nextRunAt({ cron: '@midnight', timezone: 'America/New_York', enabled: true }, AFTER), '2024-03-16T04:00:00.000Z');
  });

  test("an @ word that is not one of the contract's is refused, naming the ones there are", () => {
    for (const word of ['@mid', '@sunday', '@reboot', '@', '@daily extra']) {
      assert.match(cronError(word) ?? '', /@yearly @annually @monthly @weekly @daily @midnight @hourly/, word);
      assert.throws(() => checkScheduleRules(schedule(word)), { status: 422, field: 'cron' });
      assert.throws(() => checkMonitorRules(monitor(word)), { status: 422, field: 'cron_expression' });
    }
  });
});
