import { SUBJECTS } from '../../../streams/subjects.ts';
import type { EventStore } from '../store.ts';
import { execute, type CommandDeps, type Decided } from '../execute.ts';
import { decideJobs, evolveJobs } from './decide.ts';
import type { JobCommand, JobEvent, RetryJob } from './types.ts';

type Result = Decided<RetryJob, JobEvent>;

const run = (deps: CommandDeps, orgId: string, command: JobCommand): Promise<Result> =>
  execute(deps, SUBJECTS.jobs(orgId), command, decideJobs, evolveJobs);

/** The organization's latest job and its subject's sequence (0: none). */
export async function loadLatestJob(store: EventStore, orgId: string): Promise<{ job: RetryJob | null; seq: number }> {
  const last = await store.last<JobEvent>(SUBJECTS.jobs(orgId));
  return last ? { job: evolveJobs(null, last.event), seq: last.seq } : { job: null, seq: 0 };
}

export const acceptRetryJob = (
  deps: CommandDeps, orgId: string, jobId: string, filter: RetryJob['filter'], executionIds: string[], replay?: { endpointId: string; forwardUrls: string[] | null },
) => run(deps, orgId, { type: 'AcceptRetryJob', orgId, jobId, filter, executionIds, ...(replay ? { replay } : {}) });
export const cancelJob = (deps: CommandDeps, orgId: string, jobId: string) => run(deps, orgId, { type: 'CancelJob', jobId });
export const recordJobSteps = (deps: CommandDeps, orgId: string, steps: Omit<Extract<JobCommand, { type: 'RecordJobSteps' }>, 'type'>) =>
  run(deps, orgId, { type: 'RecordJobSteps', ...steps });
