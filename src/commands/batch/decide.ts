import { unprocessable } from '../../lib/errors.ts';
import { withEventId, type CommandMeta } from '../meta.ts';
import type { Plan } from '../organization/types.ts';
import { checkDuration, checkInstant, checkLength, checkRequest, checkUrl, emptyAsNone, inItem } from '../payload-checks.ts';
import { decideTask, firstRunAt, MAX_LANE_LENGTH } from '../task/decide.ts';
import type { TaskInput } from '../task/types.ts';
import type { FlowControlInput } from '../flow-control/types.ts';
import { checkFlowControl } from '../flow-control/rules.ts';
import { memberId } from '../../lib/ids.ts';
import type { BatchCommitEvent, BatchEvent, TaskCreatedEvent } from './types.ts';

export interface BatchInput {
  /** The batch's tasks run in this lane, or under `flow_control`'s key: one of the two. */
  lane?: string;
  flow_control?: FlowControlInput;
  /** A task may name its own `flow_control`: in a lane, it waits for its lane and its key. */
  tasks: Array<Pick<TaskInput, 'method' | 'headers' | 'body' | 'name' | 'flow_control'> & { url: string }>;
  method?: TaskInput['method'];
  headers?: Record<string, string>;
  run_at?: string;
  delay?: string;
  timeout_ms?: number;
  retry_attempts?: number;
  callback_url?: string;
}

export type BatchCommand = { type: 'AcceptBatch'; orgId: string; plan: Plan; batchId: string; input: BatchInput };

export const MAX_BATCH_TASKS = 1000;
export const MAX_BATCH_HOSTS = 50;
/** A batch's URLs are shorter than a task's own. */
export const MAX_BATCH_URL_LENGTH = 255;

/**
 * The batch's own rules: its shared fields (named as sent: `headers`, `run_at`), then
 * each task's URL length; each task's full spec is then a task's (`tasks[i].…`).
 */
function checkBatchRules(input: BatchInput, nowMs: number): void {
  if (input.lane == null && input.flow_control == null) throw unprocessable('lane is required (or flow_control: the batch\'s tasks run in one or under the other)', 'lane');
  checkLength(input.lane, 'lane', MAX_LANE_LENGTH, 1);
  // Checked as the batch's own fields, so a break names `flow_control…`, not each task's.
  checkFlowControl(input.flow_control, { needsKey: true });
  if (input.lane != null && input.flow_control != null) throw unprocessable('a batch sets lane or flow_control, not both', 'flow_control');
  if (input.tasks.length < 1 || input.tasks.length > MAX_BATCH_TASKS) throw unprocessable(`a batch holds 1 to ${MAX_BATCH_TASKS} tasks`, 'tasks');
  if (input.delay !== undefined && input.run_at !== undefined) throw unprocessable('send either delay or run_at, not both', 'run_at');
  checkDuration(input.delay, 'delay');
  checkInstant(input.run_at, 'run_at', nowMs);
  const { method, headers, timeout_ms, retry_attempts } = input;
  checkRequest({ method, headers, timeout_ms, retry_attempts });
  checkUrl(input.callback_url, 'callback_url', MAX_BATCH_URL_LENGTH);
  input.tasks.forEach((t, i) => checkUrl(t.url, `tasks[${i}].url`, MAX_BATCH_URL_LENGTH));
}

function checkHosts(input: BatchInput): void {
  const hosts = new Set(input.tasks.map((t) => new URL(t.url).host.toLowerCase()));
  if (input.callback_url) hosts.add(new URL(input.callback_url).host.toLowerCase());
  if (hosts.size > MAX_BATCH_HOSTS) {
    throw unprocessable(`a batch may reach at most ${MAX_BATCH_HOSTS} distinct hosts (url and callback_url); this one has ${hosts.size}`, 'tasks');
  }
}

/** A batch's state is its `BatchAccepted`, the batch as accepted; its tasks' creates are theirs. */
export const evolveBatch = (state: BatchEvent | null, event: BatchCommitEvent): BatchEvent | null => (event.type === 'BatchAccepted' ? event : state);

/**
 * Every task of the batch decided, each `TaskCreated` under an id that names the batch
 * (`memberId`), then the `BatchAccepted` that counts them: one commit. Nothing when the
 * batch is already accepted (its id derives from an Idempotency-Key: the same request,
 * run before a crash).
 */
export function decideBatch(command: BatchCommand, state: BatchEvent | null, meta: CommandMeta): BatchCommitEvent[] {
  if (state) return [];
  const { orgId, plan } = command;
  // An empty callback_url is none, as a task's (its tasks' own fields are theirs: decideTask).
  const input = emptyAsNone(command.input, ['callback_url']);
  checkBatchRules(input, meta.nowMs);
  const shared = {
    lane: input.lane ?? null,
    ...(input.flow_control != null ? { flow_control: input.flow_control } : {}),
    run_at: input.run_at ?? null,
    delay: input.delay ?? null,
    ...(input.timeout_ms !== undefined ? { timeout_ms: input.timeout_ms } : {}),
    ...(input.retry_attempts !== undefined ? { retry_attempts: input.retry_attempts } : {}),
    callback_url: input.callback_url ?? null,
  };
  // One run time for the whole batch; the lane then runs its tasks one by one in order.
  const scheduledFor = firstRunAt({ delay: shared.delay, run_at: shared.run_at }, meta);
  const tasks = input.tasks.map((t, i) => {
    const taskInput: TaskInput & { url: string } = {
      ...shared,
      ...t,
      method: t.method ?? input.method ?? 'POST',
      headers: { ...(input.headers ?? {}), ...(t.headers ?? {}) },
    };
    const taskId = memberId('tsk', command.batchId, i);
    const [created] = inItem(`tasks[${i}]`, () => decideTask({ type: 'CreateTask', orgId, plan, input: taskInput, runAt: scheduledFor, taskId, inBatch: true }, null, withEventId(meta, meta.newId('evt'))));
    return created as TaskCreatedEvent;
  });
  checkHosts(input);
  return [...tasks, {
    type: 'BatchAccepted',
    id: meta.eventId,
    at: meta.now,
    org_id: orgId,
    data: { batch_id: command.batchId, lane: input.lane ?? null, ...(input.flow_control != null ? { flow_key: input.flow_control.key } : {}), scheduled_for: scheduledFor, created: tasks.length },
  }];
}
