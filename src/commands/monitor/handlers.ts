import { notFound } from '../../lib/errors.ts';
import { reserveSlot, type PlanLimit } from '../quota.ts';
import { ID_PATTERN, newId } from '../../lib/ids.ts';
import { commandMeta, execute, type CommandDeps, type Decided } from '../execute.ts';
import { decideMonitor, evolveMonitor, type MonitorCommand } from './decide.ts';
import type { Monitor, MonitorEvent, MonitorInput, PingRecord } from './types.ts';

type Result = Decided<Monitor, MonitorEvent>;

export const monitorSubject = (orgId: string, id: string) => `evt.${orgId}.monitor.${id}`;

export function runMonitor(deps: CommandDeps, orgId: string, id: string, command: MonitorCommand): Promise<Result> {
  if (!ID_PATTERN.test(id) || !id.startsWith('mon_')) throw notFound('Monitor not found');
  return execute(deps, monitorSubject(orgId, id), command, decideMonitor, (s, e) => {
    const next = evolveMonitor(s, e);
    return next && next.org_id === orgId ? next : null;
  });
}

export async function createMonitor(
  deps: CommandDeps,
  orgId: string,
  input: MonitorInput & { name: string; schedule_type: 'interval' | 'cron' },
  plan: PlanLimit,
): Promise<Result> {
  const event = decideMonitor({ type: 'CreateMonitor', orgId, input }, null, commandMeta(deps.clock));
  const monitor = evolveMonitor(null, event)!;
  await reserveSlot(deps, orgId, 'monitor', plan, monitor.id, async (id) => {
    const last = await deps.store.last<MonitorEvent>(monitorSubject(orgId, id));
    return last ? evolveMonitor(null, last.event) !== null : null;
  });
  const seq = await deps.store.append(monitorSubject(orgId, monitor.id), event, 0);
  return { event, state: monitor, seq };
}

export function pingMonitor(deps: CommandDeps, orgId: string, id: string, ping: Omit<PingRecord, 'id' | 'received_at'>) {
  const now = deps.clock.now();
  return runMonitor(deps, orgId, id, { type: 'Ping', ping: { ...ping, id: newId('png', now), received_at: new Date(now).toISOString() } });
}
