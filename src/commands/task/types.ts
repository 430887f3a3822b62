import type { Envelope } from '../envelope.ts';
import type { Plan } from '../organization/types.ts';
import type { HTTP_METHODS } from '../payload-checks.ts';
import type { FlowControl, FlowControlInput } from '../flow-control/types.ts';

export type HttpMethod = (typeof HTTP_METHODS)[number];

/** The fields a user sets (create and update). */
export interface TaskSpec {
  name: string;
  url: string;
  method: HttpMethod;
  headers: Record<string, string>;
  /** A string, or a JSON object/array sent as its JSON text. */
  body: string | Record<string, unknown> | unknown[] | null;
  delay: string | null;
  run_at: string | null;
  timeout_ms: number;
  retry_attempts: number;
  callback_url: string | null;
  lane: string | null;
  /** A flow-control key and its limits (the contract's "Flow control"); a task sets `lane` or this, not both. */
  flow_control: FlowControl | null;
  enabled: boolean;
  notify_on_failure: boolean | null;
  notify_on_recovery: boolean | null;
  /** The organization's channels this resource notifies: null (or absent, before channels) = every one, [] = none. */
  channels?: string[] | null;
  expected_status_codes: string | null;
  expected_body_pattern: string | null;
  on_failure_url: string | null;
  on_recovery_url: string | null;
  script: string | null;
  debounce: string | null;
  debounce_key: string | null;
}

export interface PlannedExecution {
  id: string;
  scheduled_for: string;
  /** Push-level callback of this execution; overrides the task's. */
  callback_url: string | null;
}

export interface Task extends TaskSpec {
  id: string;
  org_id: string;
  created_at: string;
  updated_at: string;
  /** The execution created with the task, until it first runs (then the scheduler owns it). */
  pending_execution: PlannedExecution | null;
}

export type TaskEvent =
  | Envelope<'TaskCreated', { task: Task; execution: PlannedExecution }>
  | Envelope<'TaskUpdated', { task: Task; changed: string[] }>
  | Envelope<'TaskDeleted', { task: Task }>
  /** Soft delete by a bulk cancel of its lane: history kept, pending runs cancelled. */
  | Envelope<'TaskCancelled', { task: Task; reason: string }>
  /**
   * `retry_of`: a retry (`POST /executions/{id}/retry`) of that execution of the task.
   * `source_seq`: appended outside the task's subject (a bulk job's group, on the jobs
   * subject), the stream sequence of the task's state it carries; a reader that knows a
   * later change or the task's delete keeps that (`OwnedTasks`, the projector).
   */
  | Envelope<'TaskTriggered', { task: Task; execution: PlannedExecution; retry_of?: string; source_seq?: number }>;

/** Every task event type: what a task partition owner hands `OwnedTasks.onTaskEvent`. */
export const TASK_EVENT_TYPES: ReadonlySet<string> = new Set<TaskEvent['type']>(['TaskCreated', 'TaskUpdated', 'TaskDeleted', 'TaskCancelled', 'TaskTriggered']);

/** What a create or update sends: a spec's fields, `flow_control` as sent (normalized by the decider). */
export type TaskInput = Partial<Omit<TaskSpec, 'flow_control'>> & { flow_control?: FlowControlInput | null };

// `plan`: the organization's, for the fields only some plans have.
export type TaskCommand =
  /** `inBatch`: a batch's task, in its batch's lane (it may name a flow-control key too). */
  | { type: 'CreateTask'; orgId: string; plan: Plan; input: TaskInput & { url: string }; taskId?: string; runAt?: string; inBatch?: boolean }
  | { type: 'UpdateTask'; plan: Plan; input: TaskInput }
  | { type: 'DeleteTask' }
  | { type: 'CancelTask'; reason: string }
  /**
   * `ids`: a bulk job's retry names its event and execution (derived from the job and
   * position). `sourceSeq`: decided for a commit outside the task's subject, on the
   * task's state read at that sequence (see `TaskTriggered`).
   */
  | { type: 'TriggerTask'; callbackUrl: string | null; retryOf?: string; ids?: RetryIds; sourceSeq?: number };

export const TASK_DEFAULTS: Omit<TaskSpec, 'name' | 'url'> = {
  method: 'POST',
  headers: {},
  body: null,
  delay: null,
  run_at: null,
  timeout_ms: 30_000,
  retry_attempts: 5,
  callback_url: null,
  lane: null,
  flow_control: null,
  enabled: true,
  notify_on_failure: null,
  notify_on_recovery: null,
  expected_status_codes: null,
  expected_body_pattern: null,
  on_failure_url: null,
  on_recovery_url: null,
  script: null,
  debounce: null,
  debounce_key: null,
};

/** The event and execution ids a bulk job's retry is appended under. */
export interface RetryIds {
  eventId: string;
  executionId: string;
}
