import type { CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { decideTask, firstRunAt } from '../task/decide.ts';
import type { TaskInput } from '../task/types.ts';
import type { BatchEvent } from './types.ts';

export interface BatchInput {
  lane: string;
  tasks: Array<Pick<TaskInput, 'method' | 'headers' | 'body' | 'name'> & { url: string }>;
  method?: TaskInput['method'];
  headers?: Record<string, string>;
  run_at?: string;
  delay?: string;
  timeout_ms?: number;
  retry_attempts?: number;
  callback_url?: string;
}

export type BatchCommand = { type: 'AcceptBatch'; orgId: string; plan: Plan; batchId: string; input: BatchInput };

type Created = Extract<BatchEvent['data']['tasks'][number], { type: 'TaskCreated' }>;

/** A batch's state is its one event: the batch as accepted. */
export const evolveBatch = (_state: BatchEvent | null, event: BatchEvent): BatchEvent => event;

/**
 * Every task of the batch decided, in one `BatchAccepted`; nothing when the batch is
 * already accepted (its id derives from an Idempotency-Key: the same request, run
 * before a crash).
 */
export function decideBatch(command: BatchCommand, state: BatchEvent | null, meta: CommandMeta): BatchEvent[] {
  if (state) return [];
  const { orgId, plan, input } = command;
  const shared = {
    lane: input.lane,
    run_at: input.run_at ?? null,
    delay: input.delay ?? null,
    ...(input.timeout_ms !== undefined ? { timeout_ms: input.timeout_ms } : {}),
    ...(input.retry_attempts !== undefined ? { retry_attempts: input.retry_attempts } : {}),
    callback_url: input.callback_url ?? null,
  };
  // One run time for the whole batch; the lane then runs its tasks one by one in order.
  const scheduledFor = firstRunAt({ delay: shared.delay, run_at: shared.run_at }, meta);
  const tasks = input.tasks.map((t) => {
    const taskInput: TaskInput & { url: string } = {
      ...shared,
      ...t,
      method: t.method ?? input.method ?? 'POST',
      headers: { ...(input.headers ?? {}), ...(t.headers ?? {}) },
    };
    const [created] = decideTask({ type: 'CreateTask', orgId, plan, input: taskInput, runAt: scheduledFor }, null, { ...meta, eventId: meta.newId('evt') });
    return created as Created;
  });
  return [{
    type: 'BatchAccepted',
    id: meta.eventId,
    at: meta.now,
    org_id: orgId,
    data: { batch_id: command.batchId, lane: input.lane, scheduled_for: scheduledFor, tasks },
  }];
}
