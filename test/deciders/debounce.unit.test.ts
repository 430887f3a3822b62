import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideDebounce, evolveDebounce, type DebounceCommand, type DebouncedInput } from '../../src/commands/debounce/decide.ts';
import type { DebounceWindow } from '../../src/commands/debounce/types.ts';
import type { Plan } from '../../src/commands/organization/types.ts';
import { ConcurrencyError } from '../../src/commands/store.ts';
import { deciderSpec, later, meta, NOW } from './spec.ts';

const spec = deciderSpec(decideDebounce, evolveDebounce);
const ORG = 'org_deb';
const request = (input: Partial<DebouncedInput> = {}, windowTask?: DebounceCommand['windowTask'], plan: Plan = 'free'): DebounceCommand => ({
  type: 'DebounceTask',
  orgId: ORG,
  plan,
  input: { url: 'https://example.com/sync', debounce: '30s', debounce_key: 'user-1', lane: 'sync', ...input },
  ...(windowTask ? { windowTask } : {}),
});
const opened = decideDebounce(request(), null, meta());
const window: DebounceWindow = spec.stateAfter(opened)!;

describe('debounce decider', () => {
  test('no window yet: one opens, its task due at the end of it', () => {
    spec.given([]).when(request()).then([{
      type: 'DebounceWindowOpened',
      id: 'evt_test',
      at: NOW,
      org_id: ORG,
      data: { window: { lane: 'sync', debounce_key: 'user-1', task_id: 'tsk_1', opened_at: NOW, run_at: later(30_000) } },
    }]);
  });

  test('the window is a service-counted wait: scaled', () => {
    spec.given([]).when(request(), meta(NOW, 0.01)).thenMatches([{ data: { window: { run_at: later(300) } } }]);
  });

  test('an open window whose task is live takes the request: no event (the task\'s payload is replaced)', () => {
    spec.given(opened).when(request({ body: 'newer' }, 'live'), meta(later(10_000))).thenNothing();
  });

  test('a window that ended, or whose task was deleted, gives way to a new one', () => {
    spec.given(opened).when(request({}, 'live'), meta(later(30_000))).thenMatches([{ data: { window: { opened_at: later(30_000), run_at: later(60_000) } } }]);
    spec.given(opened).when(request({}, 'gone'), meta(later(10_000))).thenMatches([{ data: { window: { task_id: 'tsk_1', run_at: later(40_000) } } }]);
  });

  test('an open window whose task is not stored yet: another request is still creating it, a conflict to decide again', () => {
    spec.given(opened).when(request({}, 'unstored'), meta(later(10_000))).thenThrows((err) => err instanceof ConcurrencyError);
    // Once the window ended, a task that never came does not hold anything up.
    spec.given(opened).when(request({}, 'unstored'), meta(later(31_000))).thenMatches([{ type: 'DebounceWindowOpened' }]);
  });

  test('the rules first: a script on Free (403), the three fields together, the window\'s length (422)', () => {
    spec.given(opened).when(request({ script: 'x = 1' }, 'live')).thenRefuses({ status: 403, field: 'script' });
    spec.given([]).when(request({ lane: null } as unknown as DebouncedInput)).thenRefuses({ status: 422, field: 'lane' });
    spec.given([]).when(request({ delay: '5s' })).thenRefuses({ status: 422, field: 'delay' });
    spec.given([]).when(request({ debounce: '30 seconds' })).thenRefuses({ status: 422, field: 'debounce' });
    spec.given([]).when(request({ script: 'x = 1' }, undefined, 'pro')).thenMatches([{ type: 'DebounceWindowOpened' }]);
  });

  test('the window it opens names a new task each time', () => {
    const next = decideDebounce(request({}, 'gone'), window, { ...meta(later(10_000)), newId: () => 'tsk_next' });
    assert.equal(next[0]!.data.window.task_id, 'tsk_next');
  });
});
