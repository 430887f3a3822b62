import { notFound, unprocessable } from '../../lib/errors.ts';
import { checkResourceChannels } from '../channel/decide.ts';
import { parseDuration } from '../../lib/duration.ts';
import { unreachable } from '../../lib/unreachable.ts';
import type { CommandMeta } from '../meta.ts';
import { checkDuration, checkInstant, checkLength, checkRequest, checkUrl, emptyAsNone, MAX_NAME_LENGTH, MAX_SCRIPT_LENGTH } from '../payload-checks.ts';
import { checkPlanFeatures } from '../plan-rules.ts';
import { TASK_DEFAULTS, type Task, type TaskCommand, type TaskEvent, type TaskInput, type TaskSpec } from './types.ts';
import { nameFromUrl } from '../../lib/default-name.ts';
import { checkFlowControl, normalizeLimits } from '../flow-control/rules.ts';

export function evolveTask(_state: Task | null, event: TaskEvent): Task | null {
  switch (event.type) {
    case 'TaskCreated':
    case 'TaskUpdated':
    case 'TaskTriggered':
      return event.data.task;
    case 'TaskDeleted':
    case 'TaskCancelled':
      return null;
    default:
      return unreachable(event);
  }
}

/** When the task's first execution is due: run_at, else now + delay (scaled), else now. */
export function firstRunAt(spec: Pick<TaskSpec, 'delay' | 'run_at'>, meta: CommandMeta): string {
  if (spec.run_at) return new Date(spec.run_at).toISOString();
  if (spec.delay) {
    const ms = parseDuration(spec.delay);
    if (ms === undefined) throw unprocessable('delay must be a number followed by s, m, h or d', 'delay');
    return new Date(meta.nowMs + meta.scaleWait(ms)).toISOString();
  }
  return meta.now;
}

export const MAX_LANE_LENGTH = 255;

/**
 * A task's fields whose empty text means what their absence means (see `emptyAsNone`):
 * the spec's "empty means parallel", "empty = any 2xx", "empty = any body", and no
 * callback, notification URL, script or debounce key.
 */
export const TASK_EMPTY_AS_NONE = ['lane', 'callback_url', 'on_failure_url', 'on_recovery_url', 'expected_status_codes', 'expected_body_pattern', 'script', 'debounce_key'] as const;

/** A create's or update's input with its empty texts as none. */
export const taskInput = <T extends TaskInput>(input: T): T => emptyAsNone(input, TASK_EMPTY_AS_NONE);

/** `expected_status_codes`: comma-separated HTTP status codes. */
export function checkStatusCodes(codes: string | null | undefined): void {
  if (codes == null) return;
  checkLength(codes, 'expected_status_codes', 255);
  for (const part of codes.split(',')) {
    const code = Number(part.trim());
    if (!Number.isInteger(code) || code < 100 || code > 599) {
      throw unprocessable('expected_status_codes must be comma-separated HTTP status codes', 'expected_status_codes');
    }
  }
}

/**
 * Every rule of a task's spec, whatever path it came by (POST, PUT, a batch, a
 * debounced request): the request (payload-checks.ts), the other URLs and texts,
 * then the rules that span fields. `input` is what this command sets; `nowMs` bounds run_at.
 * `batchLane`: the task's lane is its batch's, not one this command sets, so it may
 * name a flow-control key too (the contract's "Batches": it waits for its lane and its key).
 */
export function checkTaskRules(spec: TaskSpec, input: TaskInput, nowMs: number, batchLane = false): void {
  checkLength(spec.name, 'name', MAX_NAME_LENGTH, 1);
  checkFlowControl(input.flow_control, { needsKey: true });
  checkRequest(spec);
  for (const field of ['callback_url', 'on_failure_url', 'on_recovery_url'] as const) checkUrl(spec[field], field);
  checkResourceChannels(spec.channels);
  checkDuration(spec.delay, 'delay');
  checkInstant(input.run_at, 'run_at', nowMs);
  checkLength(spec.lane, 'lane', MAX_LANE_LENGTH);
  checkDuration(spec.debounce, 'debounce');
  checkLength(spec.debounce_key, 'debounce_key', 255);
  checkLength(spec.expected_body_pattern, 'expected_body_pattern', 1024);
  checkLength(spec.script, 'script', MAX_SCRIPT_LENGTH);
  if (input.delay != null && input.run_at != null) {
    throw unprocessable('send either delay or run_at, not both', 'run_at');
  }
  if (input.debounce != null && (input.delay != null || input.run_at != null)) {
    throw unprocessable('debounce fixes the run time itself: send no delay or run_at with it', input.delay != null ? 'delay' : 'run_at');
  }
  const debounceFields = [spec.debounce, spec.debounce_key, spec.lane].filter((v) => v != null && v !== '').length;
  if ((spec.debounce || spec.debounce_key) && debounceFields < 3) {
    const missing = !spec.debounce ? 'debounce' : !spec.debounce_key ? 'debounce_key' : 'lane';
    throw unprocessable('debounce, debounce_key and lane must be sent together', missing);
  }
  checkStatusCodes(spec.expected_status_codes);
  // A lane is already the strictest control: one at a time, in order, a retry holding it.
  if (spec.lane && spec.flow_control && !batchLane) throw unprocessable('a task sets lane or flow_control, not both', 'flow_control');
}

/** The spec a create or update sends, `flow_control` in its stored form. */
function specInput(input: TaskInput): Partial<TaskSpec> {
  const { flow_control, ...rest } = stripUndefined(input);
  if (flow_control === undefined) return rest;
  return { ...rest, flow_control: flow_control && { key: flow_control.key!, ...normalizeLimits(flow_control) } };
}

export function decideTask(command: TaskCommand, state: Task | null, meta: CommandMeta): TaskEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  if (command.type === 'CreateTask' || command.type === 'UpdateTask') {
    command = { ...command, input: taskInput(command.input) } as typeof command;
    // Before anything else, "not found" included: a refused feature answers the same whatever the task.
    checkPlanFeatures(command.plan, command.input);
  }
  if (command.type === 'CreateTask') {
    const input = command.input;
    const spec: TaskSpec = { ...TASK_DEFAULTS, name: input.name ?? nameFromUrl(input.url), ...specInput(input), url: input.url };
    checkTaskRules(spec, input, meta.nowMs, command.inBatch);
    // A debounced create arrives with its window's id and run time already fixed.
    const execution = { id: meta.newId('exe'), scheduled_for: command.runAt ?? firstRunAt(spec, meta), callback_url: null };
    const task: Task = {
      ...spec,
      id: command.taskId ?? meta.newId('tsk'),
      org_id: command.orgId,
      created_at: meta.now,
      updated_at: meta.now,
      pending_execution: execution,
    };
    return [{ ...base, type: 'TaskCreated', org_id: task.org_id, data: { task, execution } }];
  }
  if (!state) throw notFound('Task not found');
  const org_id = state.org_id;
  switch (command.type) {
    case 'UpdateTask': {
      const input = stripUndefined(command.input);
      // Tasks stored before flow control have no such field.
      const spec: TaskSpec = { ...state, flow_control: state.flow_control ?? null, ...specInput(input) };
      // A new delay or run_at replaces the other one.
      if (input.delay != null && input.run_at === undefined) spec.run_at = null;
      if (input.run_at != null && input.delay === undefined) spec.delay = null;
      // A batch's task keeps its batch's lane beside its key while this sets neither.
      checkTaskRules(spec, input, meta.nowMs, input.lane === undefined && input.flow_control === undefined);
      let pending = state.pending_execution;
      if (pending && ('delay' in input || 'run_at' in input)) {
        pending = { ...pending, scheduled_for: firstRunAt(spec, meta) };
      }
      const task: Task = { ...state, ...spec, updated_at: meta.now, pending_execution: pending };
      return [{ ...base, org_id, type: 'TaskUpdated', data: { task, changed: Object.keys(input) } }];
    }
    case 'DeleteTask':
      return [{ ...base, org_id, type: 'TaskDeleted', data: { task: { ...state, updated_at: meta.now } } }];
    case 'CancelTask':
      return [{ ...base, org_id, type: 'TaskCancelled', data: { task: { ...state, updated_at: meta.now }, reason: command.reason } }];
    case 'TriggerTask': {
      // An empty one is none: the task's own callback applies.
      const callbackUrl = command.callbackUrl || null;
      checkUrl(callbackUrl, 'callback_url');
      const execution = { id: command.ids?.executionId ?? meta.newId('exe'), scheduled_for: meta.now, callback_url: callbackUrl };
      return [{
        ...base, ...(command.ids ? { id: command.ids.eventId } : {}), org_id, type: 'TaskTriggered',
        data: { task: state, execution, ...(command.retryOf ? { retry_of: command.retryOf } : {}), ...(command.sourceSeq !== undefined ? { source_seq: command.sourceSeq } : {}) },
      }];
    }
    default:
      return unreachable(command);
  }
}

function stripUndefined<T extends object>(input: T): Partial<T> {
  const out: Partial<T> = {};
  // for…in over a plain object (a parsed body): no entry array per call, on every create.
  for (const k in input) if (input[k] !== undefined) out[k] = input[k];
  return out;
}
