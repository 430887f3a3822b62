import { SUBJECTS } from '../../../streams/subjects.ts';
import { ConcurrencyError } from '../store.ts';
import { ID_PATTERN } from '../../lib/ids.ts';
import { notFound } from '../../lib/errors.ts';
import { appendEvents, commandMeta, execute, fold, type CommandDeps, type Decided } from '../execute.ts';
import type { Plan } from '../organization/types.ts';
import { decideTask, evolveTask } from './decide.ts';
import { createdInBatch } from './load.ts';
import { createCommitsOf } from './create-commits.ts';
import type { Task, TaskCommand, TaskEvent, TaskInput } from './types.ts';

type Result = Decided<Task, TaskEvent>;

function run(deps: CommandDeps, orgId: string, taskId: string, command: TaskCommand): Promise<Result> {
  if (!ID_PATTERN.test(taskId) || !taskId.startsWith('tsk_')) throw notFound('Task not found');
  return execute(deps, SUBJECTS.task(orgId, taskId), command, decideTask, (s, e) => scoped(orgId, evolveTask(s, e)), {
    // A task of a batch has no subject of its own until it changes: its create is in the batch's commit.
    initial: async () => {
      const created = await createdInBatch(deps.store, orgId, taskId);
      return created && scoped(orgId, evolveTask(null, created));
    },
  });
}

// A task id of another organization lives under that organization's subject, so it
// is simply not found here; the check guards against a forged subject too.
function scoped(orgId: string, task: Task | null): Task | null {
  return task && task.org_id === orgId ? task : null;
}

/**
 * A new task. `taskId` (an id derived from an Idempotency-Key) makes the create
 * once-only: if a task with that id is already stored — the same request ran before a
 * crash — it is the answer, and nothing new is appended; it goes on its own subject,
 * expecting it empty. Without one, the create joins the commit of the organization's
 * creates of this loop turn (`create-commits.ts`), under an id that names the commit.
 * `plan`: the organization's, whose features the task may use (absent: the Free plan's).
 */
export async function createTask(deps: CommandDeps, orgId: string, input: TaskInput & { url: string }, taskId?: string, plan: Plan = 'free'): Promise<Result> {
  if (!taskId) {
    // A new id: the create joins this turn's commit of the organization's creates.
    const meta = commandMeta(deps.clock);
    const { events, seq } = await createCommitsOf(deps.store).create(orgId, (id) => decideTask({ type: 'CreateTask', orgId, plan, input, taskId: id }, null, meta));
    return { events, state: fold(evolveTask, null, events), seq };
  }
  const events = decideTask({ type: 'CreateTask', orgId, plan, input, ...(taskId ? { taskId } : {}) }, null, commandMeta(deps.clock));
  const task = fold(evolveTask, null, events)!;
  const subject = SUBJECTS.task(orgId, task.id);
  try {
    return { events, state: task, seq: await appendEvents(deps.store, subject, events, 0) };
  } catch (err) {
    if (!taskId || !(err instanceof ConcurrencyError)) throw err;
    const stored = await deps.store.last<TaskEvent>(subject);
    const state = stored && scoped(orgId, evolveTask(null, stored.event));
    // Deleted since: the key is being reused for a new task.
    if (!stored || !state) return createTask(deps, orgId, input, undefined, plan);
    return { events: [], state, seq: stored.seq };
  }
}

export const updateTask = (deps: CommandDeps, orgId: string, id: string, input: TaskInput, plan: Plan) =>
  run(deps, orgId, id, { type: 'UpdateTask', plan, input });
export const deleteTask = (deps: CommandDeps, orgId: string, id: string) => run(deps, orgId, id, { type: 'DeleteTask' });
export const cancelTask = (deps: CommandDeps, orgId: string, id: string, reason: string) =>
  run(deps, orgId, id, { type: 'CancelTask', reason });
export const triggerTask = (deps: CommandDeps, orgId: string, id: string, callbackUrl: string | null, retryOf?: string) =>
  run(deps, orgId, id, { type: 'TriggerTask', callbackUrl, ...(retryOf ? { retryOf } : {}) });
