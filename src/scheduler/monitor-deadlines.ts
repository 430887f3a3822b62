import { execute, type CommandDeps } from '../commands/execute.ts';
import { decideMonitor, evolveMonitor } from '../commands/monitor/decide.ts';
import { monitorSubject } from '../commands/monitor/handlers.ts';
import type { Monitor } from '../commands/monitor/types.ts';
import type { DeadlineJob } from '../commands/execution/job.ts';
import { ConcurrencyError } from '../events/store.ts';

export function deadlineJob(m: Monitor): DeadlineJob {
  return {
    kind: 'deadline',
    org_id: m.org_id,
    execution_id: `${m.id}@${m.deadline_at}`,
    source: { type: 'monitor', id: m.id, name: m.name },
    attempt: 1,
    deadline_at: m.deadline_at!,
  };
}

/**
 * A deadline came due: the monitor goes down, or nothing happens when a ping, pause
 * or change moved it (`decideMonitor`, `CheckDeadline`). Guarded by the monitor
 * subject's sequence, so a ping arriving at the same moment wins. Still contended
 * when the budget is spent: a ConcurrencyError (transient), so the timer is fired
 * again, never dropped.
 */
export async function recordDeadline(deps: CommandDeps, job: DeadlineJob): Promise<void> {
  if (deps.monitorOwners) {
    await deps.monitorOwners.run(job.org_id, job.source.id, { type: 'CheckDeadline', deadlineAt: job.deadline_at });
    return;
  }
  const subject = monitorSubject(job.org_id, job.source.id);
  await execute(deps, subject, { type: 'CheckDeadline', deadlineAt: job.deadline_at }, decideMonitor, evolveMonitor, { contended: () => new ConcurrencyError(subject) });
}
