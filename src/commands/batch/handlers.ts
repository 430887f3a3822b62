import { SUBJECTS } from '../../../streams/definitions.ts';
import { ConcurrencyError } from '../../events/store.ts';
import { newId } from '../../lib/ids.ts';
import { commandMeta, type CommandDeps } from '../execute.ts';
import { decideTask, firstRunAt } from '../task/decide.ts';
import type { TaskEvent, TaskInput } from '../task/types.ts';
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

export const batchSubject = (orgId: string, batchId: string) => `evt.${orgId}.batch.${batchId}`;

type Created = Extract<TaskEvent, { type: 'TaskCreated' }>;

/** Appends each task's TaskCreated in batch order; already-appended ones are skipped. */
export async function materializeBatch(deps: CommandDeps, batch: BatchEvent): Promise<number> {
  // Publishes go out in order on one connection, so the stream keeps the batch order.
  const acks = batch.data.tasks.map((e) =>
    deps.store.append(SUBJECTS.task(e.org_id, e.data.task.id), e, 0).catch((err: unknown) => {
      if (err instanceof ConcurrencyError) return 0;
      throw err;
    }),
  );
  return Math.max(0, ...(await Promise.all(acks)));
}

/** Decides every task of the batch, stores the batch atomically, then its tasks. */
/**
 * `batchId` (derived from an Idempotency-Key) makes it once-only: a batch already
 * stored under that id — the same request, run before a crash — is completed and
 * answered instead of a second one being accepted.
 */
export async function createBatch(deps: CommandDeps, orgId: string, input: BatchInput, onceBatchId?: string): Promise<{ event: BatchEvent; seq: number }> {
  const meta = commandMeta(deps.clock);
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
    const eventMeta = { ...meta, eventId: newId('evt', meta.nowMs) };
    return decideTask({ type: 'CreateTask', orgId, input: taskInput, runAt: scheduledFor }, null, eventMeta) as Created;
  });
  const batchId = onceBatchId ?? newId('cmd', meta.nowMs);
  const event: BatchEvent = {
    type: 'BatchAccepted',
    id: meta.eventId,
    at: meta.now,
    org_id: orgId,
    data: { batch_id: batchId, lane: input.lane, scheduled_for: scheduledFor, tasks },
  };
  try {
    await deps.store.append(batchSubject(orgId, batchId), event, 0);
  } catch (err) {
    if (!onceBatchId || !(err instanceof ConcurrencyError)) throw err;
    const stored = await deps.store.last<BatchEvent>(batchSubject(orgId, batchId));
    if (!stored || stored.event.type !== 'BatchAccepted') throw err;
    return { event: stored.event, seq: await materializeBatch(deps, stored.event) };
  }
  const seq = await materializeBatch(deps, event);
  return { event, seq };
}
