import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isMonitorSubject, SUBJECTS } from '../streams/subjects.ts';

test('isMonitorSubject: a monitor aggregate\'s subject, and nothing else the log holds', () => {
  assert.equal(isMonitorSubject('evt.org_1.monitor.mon_1'), true);
  for (const other of [
    'evt.org_1.monitor.mon_1.x', 'evt.org_1.monitors.mon_1', 'evt.org_1.monitor', 'evt.org_1.quota.monitor', SUBJECTS.task('org_1', 'tsk_1'),
    SUBJECTS.partition(3), SUBJECTS.apiKey('monitor'), 'timer.1.mon_1.deadline', 'xvt.org_1.monitor.mon_1',
  ]) assert.equal(isMonitorSubject(other), false, other);
});
