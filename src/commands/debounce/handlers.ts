import { createHash } from 'node:crypto';
import { SUBJECTS } from '../../../streams/definitions.ts';
import { parseDuration } from '../../lib/duration.ts';
import { ApiError, unprocessable } from '../../lib/errors.ts';
import { ConcurrencyError } from '../../events/store.ts';
import { commandMeta, retryConflicts, type CommandDeps, type Decided } from '../execute.ts';
import { decideTask, evolveTask } from '../task/decide.ts';
import { updateTask } from '../task/handlers.ts';
import { TASK_DEFAULTS, type Task, type TaskEvent, type TaskInput } from '../task/types.ts';
import type { DebounceEvent, DebounceWindow } from './types.ts';

export function debounceSubject(orgId: string, lane: string, key: string): string {
  const digest = createHash('sha256').update(`${lane}\u0000${key}`).digest('hex').slice(0, 32);
  return `evt.${orgId}.debounce.${digest}`;
}

/**
 * A debounced create. The first request of a window claims it (an append guarded by
 * the window subject's last sequence, so concurrent first requests elect one) and
 * creates the task to run at request time + window; every later request inside the
 * window replaces that task's payload and keeps its run time. After the window, or
 * once its task is deleted, the next request opens a new one. Requests for one
 * window queue behind each other in this process (`retryConflicts`), so only one of
 * them opens it; a conflict with another process decides again.
 */
export async function createDebouncedTask(
  deps: CommandDeps,
  orgId: string,
  input: TaskInput & { url: string; debounce: string; debounce_key: string; lane: string },
): Promise<Decided<Task, TaskEvent> & { replaced: boolean }> {
  const windowMs = parseDuration(input.debounce);
  if (windowMs === undefined) throw unprocessable('debounce must be a number followed by s, m, h or d', 'debounce');
  const subject = debounceSubject(orgId, input.lane, input.debounce_key);
  return retryConflicts(deps, subject, async () => {
    const last = await deps.store.last<DebounceEvent>(subject);
    const meta = commandMeta(deps.clock);
    const open = last && Date.parse(last.event.data.window.run_at) > meta.nowMs ? last.event.data.window : null;
    if (open) {
      try {
        // The later request's payload replaces the earlier one whole; the run time stays.
        const { delay: _d, run_at: _r, ...fields } = { ...TASK_DEFAULTS, ...input };
        const result = await updateTask(deps, orgId, open.task_id, fields);
        return { ...result, replaced: true };
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        // Not stored yet: the request that opened the window (in another process) is
        // still creating its task, a conflict like any other. Stored but gone: it was
        // deleted or cancelled, and this request opens a new window below.
        if (!(await deps.store.last(SUBJECTS.task(orgId, open.task_id)))) throw new ConcurrencyError(subject);
      }
    }
    const window: DebounceWindow = {
      lane: input.lane,
      debounce_key: input.debounce_key,
      task_id: meta.newId('tsk'),
      opened_at: meta.now,
      run_at: new Date(meta.nowMs + meta.scaleWait(windowMs)).toISOString(),
    };
    const opened: DebounceEvent = { type: 'DebounceWindowOpened', id: meta.eventId, at: meta.now, org_id: orgId, data: { window } };
    // A conflict here = another process opened this window first: the retry joins it.
    await deps.store.append(subject, opened, last?.seq ?? 0);
    const event = decideTask({ type: 'CreateTask', orgId, input, taskId: window.task_id, runAt: window.run_at }, null, commandMeta(deps.clock));
    const task = evolveTask(null, event)!;
    const seq = await deps.store.append(SUBJECTS.task(orgId, task.id), event, 0);
    return { event, state: task, seq, replaced: false };
  });
}
