import { conflict } from '../../lib/errors.ts';
import type { CommandMeta } from '../meta.ts';
import type { JobCommand, JobEvent, RetryJob } from './types.ts';

const unreachable = (x: never): never => {
  throw new Error(`unhandled ${JSON.stringify(x)}`);
};

/**
 * An organization's jobs are one aggregate on one subject (`evt.<org>.jobs`), whose
 * state is its latest job: at most one runs at a time, and every group of steps of the
 * running one is a guarded append naming the position it starts at, so two workers (a
 * stale one and its successor) cannot both record a step.
 */
export function evolveJobs(_state: RetryJob | null, event: JobEvent): RetryJob | null {
  return event.data.job;
}

export function decideJobs(command: JobCommand, state: RetryJob | null, meta: CommandMeta): JobEvent[] {
  const base = { id: meta.eventId, at: meta.now };
  switch (command.type) {
    case 'AcceptRetryJob': {
      // The same Idempotency-Key again: the job it made is the answer.
      if (state?.id === command.jobId) return [];
      if (state?.status === 'running') throw conflict(`Job ${state.id} is running: one bulk job at a time per organization`);
      const total = command.executionIds.length;
      const job: RetryJob = {
        id: command.jobId, org_id: command.orgId, kind: command.replay ? 'replay' : 'retry', status: total ? 'running' : 'done', filter: command.filter,
        ...(command.replay ? { endpoint_id: command.replay.endpointId, forward_urls: command.replay.forwardUrls } : {}),
        total, done: 0, skipped: 0, position: 0, created_at: meta.now, finished_at: total ? null : meta.now,
      };
      return [{ ...base, org_id: command.orgId, type: 'RetryJobAccepted', data: { job, execution_ids: command.executionIds } }];
    }
    case 'RecordJobSteps': {
      // Steps of a job no longer running, or from a position already taken: nothing (a stale worker's).
      if (!state || state.id !== command.jobId || state.status !== 'running' || state.position !== command.position) return [];
      if (!command.steps.length || state.position + command.steps.length > state.total) {
        throw new Error(`job ${state.id}: ${command.steps.length} steps from position ${state.position} of ${state.total}`);
      }
      const retried = command.steps.filter((s) => s.outcome === 'retried').length;
      const position = state.position + command.steps.length;
      const finished = position >= state.total;
      const job: RetryJob = {
        ...state, position, done: state.done + retried, skipped: state.skipped + command.steps.length - retried,
        status: finished ? 'done' : 'running', finished_at: finished ? meta.now : null,
      };
      return [{ ...base, org_id: state.org_id, type: 'RetryJobStepped', data: { job, steps: command.steps } }];
    }
    case 'CancelJob': {
      // A job no longer running (done, cancelled, or an older one: only the latest can run) stays as it is.
      if (!state || state.id !== command.jobId || state.status !== 'running') return [];
      return [{ ...base, org_id: state.org_id, type: 'RetryJobCancelled', data: { job: { ...state, status: 'cancelled', finished_at: meta.now } } }];
    }
    default:
      return unreachable(command);
  }
}
