import { newId } from '../../lib/ids.ts';
import type { CommandDeps, Decided } from '../execute.ts';
import { orgAggregate } from '../org-aggregate.ts';
import type { PlanLimit } from '../plan-rules.ts';
import { decideMonitor, evolveMonitor, type MonitorCommand } from './decide.ts';
import type { Monitor, MonitorEvent, MonitorInput, PingRecord } from './types.ts';

type Result = Decided<Monitor, MonitorEvent>;

export const monitorSubject = (orgId: string, id: string) => `evt.${orgId}.monitor.${id}`;

const monitors = orgAggregate({ kind: 'monitor', idPrefix: 'mon_', notFound: 'Monitor not found', subject: monitorSubject, decide: decideMonitor, evolve: evolveMonitor });

export function runMonitor(deps: CommandDeps, orgId: string, id: string, command: MonitorCommand): Promise<Result> {
  return monitors.run(deps, orgId, id, command);
}

/** `plan.live` lists the organization's monitors in the read model, for the Free plan's limit. */
export function createMonitor(
  deps: CommandDeps,
  orgId: string,
  input: MonitorInput & { name: string; schedule_type: 'interval' | 'cron' },
  plan: PlanLimit,
): Promise<Result> {
  return monitors.create(deps, orgId, { type: 'CreateMonitor', orgId, input }, plan);
}

export function pingMonitor(deps: CommandDeps, orgId: string, id: string, ping: Omit<PingRecord, 'id' | 'received_at'>) {
  const now = deps.clock.now();
  return runMonitor(deps, orgId, id, { type: 'Ping', ping: { ...ping, id: newId('png', now), received_at: new Date(now).toISOString() } });
}
