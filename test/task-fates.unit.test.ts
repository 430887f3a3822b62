// What a task partition owner knows of its tasks' deletes, against triggers decided
// elsewhere on an older state (`TaskFates`): known, known not gone, or "read it first".
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TaskFates } from '../src/commands/partition/task-fates.ts';

test('a delete read wins over any trigger of the task; no delete read since the owner\'s start means not gone', () => {
  const f = new TaskFates(100);
  f.gone('tsk_a', 'task deleted', 120);
  assert.equal(f.fate('tsk_a', 10), 'task deleted', 'decided on a state before the owner\'s start: the delete it read still wins');
  assert.equal(f.fate('tsk_a', 110), 'task deleted');
  assert.equal(f.fate('tsk_b', 99), null, 'decided on the state just before the owner\'s reading: every later delete was read');
  assert.equal(f.fate('tsk_b', 50), undefined, 'older than what was read: the owner cannot tell');
});

test('what a read of the task says is kept; a later delete read overrides "not gone", never the other way', () => {
  const f = new TaskFates(100);
  f.learned('tsk_a', null, 90);
  assert.equal(f.fate('tsk_a', 10), null);
  f.gone('tsk_a', 'task cancelled', 130);
  assert.equal(f.fate('tsk_a', 10), 'task cancelled');
  f.learned('tsk_a', null, 140);
  assert.equal(f.fate('tsk_a', 10), 'task cancelled', 'a delete is final: task ids are never reused');
});

test('bounded: a forgotten delete moves what the owner can tell past it', () => {
  const f = new TaskFates(0, 2);
  f.gone('tsk_a', 'task deleted', 10);
  f.gone('tsk_b', 'task deleted', 20);
  assert.equal(f.fate('tsk_c', 5), null);
  f.gone('tsk_c', 'task deleted', 30);
  assert.equal(f.fate('tsk_a', 5), undefined, 'its delete forgotten: read it first');
  assert.equal(f.fate('tsk_d', 5), undefined, 'a state from before the forgotten delete: read it first');
  assert.equal(f.fate('tsk_d', 10), null, 'from the forgotten delete on, every delete is still known');
  assert.equal(f.fate('tsk_b', 5), 'task deleted');
});
