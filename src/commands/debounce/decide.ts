import { ConcurrencyError } from '../store.ts';
import { parseDuration } from '../../lib/duration.ts';
import { unprocessable } from '../../lib/errors.ts';
import type { CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { checkPlanFeatures } from '../plan-rules.ts';
import { checkTaskRules, taskInput } from '../task/decide.ts';
import { TASK_DEFAULTS, type TaskInput, type TaskSpec } from '../task/types.ts';
import { nameFromUrl } from '../../lib/default-name.ts';
import type { DebounceEvent, DebounceWindow } from './types.ts';

export type DebouncedInput = TaskInput & { url: string; debounce: string; debounce_key: string; lane: string };

export type DebounceCommand = {
  type: 'DebounceTask';
  orgId: string;
  plan: Plan;
  input: DebouncedInput;
  /** The open window's task as the store has it (read after the load): live, gone (deleted or cancelled) or not stored yet. */
  windowTask?: 'live' | 'gone' | 'unstored';
};

export const evolveDebounce = (_state: DebounceWindow | null, event: DebounceEvent): DebounceWindow => event.data.window;

/** Whether a create is a debounced one: it names a window's length or key (an empty key is none). */
export const isDebounced = (input: TaskInput): boolean => input.debounce != null || (input.debounce_key != null && input.debounce_key !== '');

/** The window still taking requests at `nowMs`, if any. */
export const openWindow = (window: DebounceWindow | null, nowMs: number): DebounceWindow | null =>
  window && Date.parse(window.run_at) > nowMs ? window : null;

/**
 * A debounced request: the rules first (the plan's features, the three fields
 * together, the window's length), then the window. An open window whose task is
 * live takes the request (no event: its task's payload is replaced); none, an
 * expired one, or one whose task is gone opens a new window. An open window whose
 * task is not stored yet is another request still creating it: a conflict, decided
 * again.
 */
export function decideDebounce(command: DebounceCommand, window: DebounceWindow | null, meta: CommandMeta): DebounceEvent[] {
  const input = taskInput(command.input);
  checkPlanFeatures(command.plan, input);
  checkTaskRules({ ...TASK_DEFAULTS, name: nameFromUrl(input.url), ...input } as TaskSpec, input, meta.nowMs);
  const windowMs = parseDuration(input.debounce);
  if (windowMs === undefined) throw unprocessable('debounce must be a number followed by s, m, h or d', 'debounce');
  const open = openWindow(window, meta.nowMs);
  if (open && command.windowTask === 'unstored') throw new ConcurrencyError(`debounce window of ${open.task_id}`);
  if (open && command.windowTask !== 'gone') return [];
  const opened: DebounceWindow = {
    lane: input.lane,
    debounce_key: input.debounce_key,
    task_id: meta.newId('tsk'),
    opened_at: meta.now,
    run_at: new Date(meta.nowMs + meta.scaleWait(windowMs)).toISOString(),
  };
  return [{ type: 'DebounceWindowOpened', id: meta.eventId, at: meta.now, org_id: command.orgId, data: { window: opened } }];
}
