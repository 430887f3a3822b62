// Where the catalogue says each event type is stored decides what `jetcron replay`
// reads for a selection of types (`subjectFilterOf`): a type stored on two subject
// patterns must not be narrowed to one of them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { subjectFilterOf } from '../src/commands/catalogue.ts';

test('a bulk job\'s triggers and replays are on the jobs subject too: a replay of those types reads every subject', () => {
  for (const type of ['TaskTriggered', 'ScheduleTriggered', 'InboundEventReplayed'] as const) {
    assert.equal(subjectFilterOf([type], 'org_a'), undefined, type);
  }
  assert.equal(subjectFilterOf(['RetryJobStepped'], 'org_a'), 'evt.org_a.jobs');
  assert.equal(subjectFilterOf(['TaskUpdated'], 'org_a'), 'evt.org_a.task.*', 'a type on one subject pattern is read from it alone');
});
