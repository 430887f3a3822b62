import { notFound } from '../../lib/errors.ts';
import { ID_PATTERN, newId } from '../../lib/ids.ts';
import type { CommandDeps, Decided } from '../execute.ts';
import { createHeads } from '../heads.ts';
import { orgAggregate } from '../org-aggregate.ts';
import type { PlanLimit } from '../plan-rules.ts';
import { decideMonitor, evolveMonitor, type MonitorCommand } from './decide.ts';
import type { Monitor, MonitorEvent, MonitorInput, PingRequest } from './types.ts';

type Result = Decided<Monitor, MonitorEvent>;

export const monitorSubject = (orgId: string, id: string) => `evt.${orgId}.monitor.${id}`;

/** Which monitor of the organization has this slug now (the read model), null for none. */
export type SlugOwner = (orgId: string, slug: string) => Promise<string | null>;

/**
 * Monitors this process wrote last, so a ping (a monitor's every ping goes to the
 * process its client is connected to, often the same one) is decided without loading
 * the monitor: one JetStream round trip instead of two. 100,000 monitors' states are
 * some 100 MB at most.
 */
const REMEMBERED_MONITORS = 100_000;

const monitors = orgAggregate({
  kind: 'monitor', idPrefix: 'mon_', notFound: 'Monitor not found', subject: monitorSubject, decide: decideMonitor, evolve: evolveMonitor,
  heads: createHeads<Monitor>(REMEMBERED_MONITORS),
});

/** A command on an existing monitor: decided by its partition's owner when owners hold the monitors, else here from the log. */
export function runMonitor(deps: CommandDeps, orgId: string, id: string, command: MonitorCommand): Promise<Result> {
  if (!deps.monitorOwners) return monitors.run(deps, orgId, id, command);
  if (!ID_PATTERN.test(id) || !id.startsWith('mon_')) throw notFound('Monitor not found');
  return deps.monitorOwners.run(orgId, id, command);
}

const ownerOf = async (slugOwner: SlugOwner, orgId: string, slug: string | null | undefined) => (slug ? slugOwner(orgId, slug) : null);

/** `plan.live` lists the organization's monitors in the read model, for the Free plan's limit. */
export async function createMonitor(
  deps: CommandDeps,
  orgId: string,
  input: MonitorInput & { name: string; schedule_type: 'interval' | 'cron' },
  plan: PlanLimit,
  slugOwner: SlugOwner,
): Promise<Result> {
  const made = await monitors.create(deps, orgId, { type: 'CreateMonitor', orgId, input, slugOwner: await ownerOf(slugOwner, orgId, input.slug) }, plan);
  if (made.events[0]) deps.monitorOwners?.created(orgId, made.events[0], made.seq);
  return made;
}

export async function updateMonitor(deps: CommandDeps, orgId: string, id: string, input: MonitorInput, slugOwner: SlugOwner): Promise<Result> {
  return runMonitor(deps, orgId, id, { type: 'UpdateMonitor', input, slugOwner: await ownerOf(slugOwner, orgId, input.slug) });
}

/** `slug`: the monitor was named by its slug, which must still be its own. */
export function pingMonitor(deps: CommandDeps, orgId: string, id: string, ping: Omit<PingRequest, 'id' | 'received_at'>, slug?: string) {
  const now = deps.clock.now();
  const request = { ...ping, id: newId('png', now), received_at: new Date(now).toISOString() };
  return runMonitor(deps, orgId, id, slug === undefined ? { type: 'Ping', ping: request } : { type: 'Ping', ping: request, slug });
}
