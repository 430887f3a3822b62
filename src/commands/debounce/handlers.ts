import { SUBJECTS } from '../../../streams/subjects.ts';
import { ApiError } from '../../lib/errors.ts';
import { ConcurrencyError } from '../store.ts';
import { appendEvents, commandMeta, executeOnce, fold, retryConflicts, type CommandDeps, type Decided } from '../execute.ts';
import type { Plan } from '../organization/types.ts';
import { decideTask, evolveTask } from '../task/decide.ts';
import { updateTask } from '../task/handlers.ts';
import { TASK_DEFAULTS, type Task, type TaskEvent } from '../task/types.ts';
import { decideDebounce, evolveDebounce, openWindow, type DebounceCommand, type DebouncedInput } from './decide.ts';
import type { DebounceWindow } from './types.ts';
import { subjectToken } from '../../lib/subject-token.ts';

export function debounceSubject(orgId: string, lane: string, key: string): string {
  return `evt.${orgId}.debounce.${subjectToken(`${lane}\u0000${key}`)}`;
}

/**
 * A debounced create. The first request of a window claims it (an append guarded by
 * the window subject's last sequence, so concurrent first requests elect one) and
 * creates the task to run at request time + window; every later request inside the
 * window replaces that task's payload and keeps its run time. After the window, or
 * once its task is deleted, the next request opens a new one (`decideDebounce`).
 * Requests for one window queue behind each other in this process, task writes
 * included, so only one of them opens it; a conflict with another process decides again.
 */
export async function createDebouncedTask(deps: CommandDeps, orgId: string, input: DebouncedInput, plan: Plan): Promise<Decided<Task, TaskEvent> & { replaced: boolean }> {
  const subject = debounceSubject(orgId, input.lane, input.debounce_key);
  const gather = async (command: DebounceCommand, window: DebounceWindow | null, meta: { nowMs: number }): Promise<DebounceCommand> => {
    const open = openWindow(window, meta.nowMs);
    if (!open) return command;
    const last = await deps.store.last<TaskEvent>(SUBJECTS.task(orgId, open.task_id));
    return { ...command, windowTask: !last ? 'unstored' : evolveTask(null, last.event) ? 'live' : 'gone' };
  };
  return retryConflicts(deps, subject, async () => {
    const { events, state: window } = await executeOnce(deps, subject, { type: 'DebounceTask', orgId, plan, input }, decideDebounce, evolveDebounce, { gather });
    if (!events.length) {
      // The later request's payload replaces the earlier one whole; the run time stays.
      const { delay: _d, run_at: _r, ...fields } = { ...TASK_DEFAULTS, ...input };
      try {
        return { ...(await updateTask(deps, orgId, window!.task_id, fields, plan)), replaced: true };
      } catch (err) {
        // Deleted or cancelled since it was read: decided again, this opens a new window.
        if (err instanceof ApiError && err.status === 404) throw new ConcurrencyError(subject);
        throw err;
      }
    }
    // A conflict above = another process opened this window first: the retry joins it.
    const created = decideTask({ type: 'CreateTask', orgId, plan, input, taskId: window!.task_id, runAt: window!.run_at }, null, commandMeta(deps.clock));
    const seq = await appendEvents(deps.store, SUBJECTS.task(orgId, window!.task_id), created, 0);
    return { events: created, state: fold(evolveTask, null, created), seq, replaced: false };
  });
}
