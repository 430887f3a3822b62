import { Router } from 'express';
import { createTask, deleteTask, triggerTask, updateTask } from '../../commands/task/handlers.ts';
import type { Task, TaskInput } from '../../commands/task/types.ts';
import { createDebouncedTask } from '../../commands/debounce/handlers.ts';
import { isDebounced } from '../../commands/debounce/decide.ts';
import { taskDoc } from '../../projections/apply-event.ts';
import { notFound, unprocessable } from '../../lib/errors.ts';
import { jsonObject } from '../body.ts';
import { handler, type ApiDeps } from '../context.ts';
import { idempotent, onceId } from '../idempotency.ts';
import { orgPlan } from '../plan-limits.ts';
import { createTaskSchema, triggerTaskSchema, updateTaskSchema } from '../schemas/task.ts';
import { historyRow, taskResource, tasksWithStatus } from '../serializers.ts';
import { validate } from '../validate.ts';
import { checkScript } from '../script-checks.ts';
import { limitParam } from './executions.ts';

/** A new task's answer once it is written as the decided state, without waiting for the projector. */
async function createdAnswer(deps: ApiDeps, orgId: string, task: Task, seq: number) {
  await deps.reads.wrote(orgId, seq);
  const pending = task.pending_execution;
  return { channels: null, ...taskDoc(task), id: task.id, status: 'pending', next_run_at: pending?.scheduled_for ?? null, last_execution_id: pending?.id ?? null };
}

/**
 * `POST /tasks` once the request is authenticated and its body parsed: the 201 body
 * (a debounce window opened or replaced, or a new task). Shared by the express route
 * and the receiver ahead of express (`task-receiver.ts`). `onceTaskId`: the id an
 * Idempotency-Key gives the task.
 */
export async function createTaskAnswer(deps: ApiDeps, orgId: string, body: Record<string, unknown>, onceTaskId?: string): Promise<{ data: unknown; message?: string }> {
  const input = validate<TaskInput & { url: string }>(createTaskSchema, body);
  const plan = await orgPlan(deps, orgId);
  await checkScript(deps.scripts, plan, 'task', input.script);
  if (isDebounced(input)) {
    // The window's rules (all three fields together) are checked before it decides create or replace.
    const d = await createDebouncedTask(deps, orgId, input as Parameters<typeof createDebouncedTask>[2], plan);
    const message = d.replaced ? 'Debounced: replaced the pending payload; the run time is unchanged' : 'Debounce window opened';
    return { data: d.replaced ? await updatedAnswer(deps, orgId, d.state!, d.seq) : await createdAnswer(deps, orgId, d.state!, d.seq), message };
  }
  const { state, seq } = await createTask(deps, orgId, input, onceTaskId, plan);
  return { data: await createdAnswer(deps, orgId, state!, seq) };
}

/** A changed task's answer: the decided state over what the read model has so far (its status). */
async function updatedAnswer(deps: ApiDeps, orgId: string, task: Task, seq: number) {
  await deps.reads.wrote(orgId, seq);
  const pending = task.pending_execution;
  const row = await tasksWithStatus(deps.db).selectAll().where('id', '=', task.id).where('org_id', '=', orgId).executeTakeFirst();
  return { channels: null, ...(row ? taskResource(row) : {}), ...taskDoc(task), id: task.id, ...(pending ? { next_run_at: pending.scheduled_for, last_execution_id: pending.id } : {}) };
}

export function taskRoutes(deps: ApiDeps): Router {
  const r = Router();

  const loadTask = async (orgId: string, id: string) => {
    const row = await tasksWithStatus(deps.db).selectAll().where('id', '=', id).where('org_id', '=', orgId).where('deleted_at', 'is', null).executeTakeFirst();
    if (!row) throw notFound('Task not found');
    return row;
  };

  r.get('/tasks', handler(async (req, res) => {
    const rows = await tasksWithStatus(deps.db).selectAll().where('org_id', '=', req.orgId).where('deleted_at', 'is', null)
      .orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
    res.json({ data: rows.map(taskResource) });
  }));

  r.get('/tasks/:id', handler(async (req, res) => {
    res.json({ data: taskResource(await loadTask(req.orgId, req.params.id!)) });
  }));

  r.post('/tasks', idempotent(deps), handler(async (req, res) => {
    res.status(201).json(await createTaskAnswer(deps, req.orgId, jsonObject(req), onceId(res, 'tsk')));
  }));

  r.put('/tasks/:id', handler(async (req, res) => {
    const input = validate<TaskInput>(updateTaskSchema, jsonObject(req));
      const plan = await orgPlan(deps, req.orgId);
    await checkScript(deps.scripts, plan, 'task', input.script);
    const { state, seq } = await updateTask(deps, req.orgId, req.params.id!, input, plan);
    res.json({ data: await updatedAnswer(deps, req.orgId, state!, seq) });
  }));

  r.delete('/tasks/:id', handler(async (req, res) => {
    const { seq } = await deleteTask(deps, req.orgId, req.params.id!);
    await deps.reads.wrote(req.orgId, seq);
    res.status(204).end();
  }));

  r.post('/tasks/:id/trigger', handler(async (req, res) => {
    const input = validate<{ callback_url?: string }>(triggerTaskSchema, jsonObject(req, true));
    const { events: [event], seq } = await triggerTask(deps, req.orgId, req.params.id!, input.callback_url ?? null);
    await deps.reads.wrote(req.orgId, seq);
    const executionId = event?.type === 'TaskTriggered' ? event.data.execution.id : null;
    res.status(202).json({ data: { execution_id: executionId, status: 'pending' }, message: 'Execution queued' });
  }));

  r.get('/tasks/:id/executions', handler(async (req, res) => {
    await loadTask(req.orgId, req.params.id!);
    const rows = await deps.db.selectFrom('executions').selectAll().where('source_id', '=', req.params.id!)
      .where('org_id', '=', req.orgId).orderBy('scheduled_for', 'desc').orderBy('id', 'desc').limit(limitParam(req)).execute();
    res.json({ data: rows.map(historyRow) });
  }));

  return r;
}
