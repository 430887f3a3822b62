import { ConfigError, type Config } from '../config.ts';
import type { Nats } from '../nats/connection.ts';
import { rollCall, type ProcessInfo } from '../nats/roll-call.ts';

/** The roles whose work depends on the dispatch mode: the translator and timers (scheduler), the senders (dispatcher). */
const MODE_ROLES = new Set(['scheduler', 'dispatcher']);
/** The roles whose work depends on the monitors' mode: the owners (api), the deadline keeper (scheduler). */
const MONITOR_MODE_ROLES = new Set(['api', 'scheduler']);
/** How long the roll call waits for the first answer, and for the next once answers come. */
const WAIT_MS = 2_000;
const STALL_MS = 150;

/** Live processes whose tasks go another way than `mode`: both would send them (twice, lanes overlapping). */
export function otherModes(processes: ProcessInfo[], mode: Config['dispatchMode']): ProcessInfo[] {
  return processes.filter((p) => p.roles.some((r) => MODE_ROLES.has(r)) && (p.dispatch ?? 'queue') !== mode);
}

/**
 * Live processes that decide pings another way than `owners` says: both would write a
 * monitor's pings (on its subject and in its partition's commits), and both keep its
 * deadlines. A process that does not say is of a version before monitor owners were on
 * by default, which ran without them unless told (`JETCRON_MONITOR_OWNERS=1`).
 */
export function otherMonitorModes(processes: ProcessInfo[], owners: boolean): ProcessInfo[] {
  return processes.filter((p) => p.roles.some((r) => MONITOR_MODE_ROLES.has(r)) && (p.monitors ?? 'subjects') !== (owners ? 'owners' : 'subjects'));
}

const listed = (others: ProcessInfo[], setting: (p: ProcessInfo) => string) =>
  others.slice(0, 3).map((p) => `pid ${p.pid} on ${p.host} (${p.roles.join(',')}, ${setting(p)})`).join('; ') + (others.length > 3 ? ` and ${others.length - 3} more` : '');

/**
 * Refuses to start a process that would send tasks, or decide pings, one way while live
 * processes of the deployment do it the other: a switch of JETCRON_DISPATCH or
 * JETCRON_MONITOR_OWNERS stops them all first. Two processes started at the same instant
 * in different modes are not caught (each asks before the other answers).
 */
export async function guardModes(nats: Nats, config: Pick<Config, 'dispatchMode' | 'monitorOwners' | 'roles'>): Promise<void> {
  const roles = [...config.roles];
  const dispatch = roles.some((r) => MODE_ROLES.has(r));
  const monitors = roles.some((r) => MONITOR_MODE_ROLES.has(r));
  if (!dispatch && !monitors) return;
  const processes = await rollCall(nats, WAIT_MS, STALL_MS);
  const others = dispatch ? otherModes(processes, config.dispatchMode) : [];
  if (others.length) {
    throw new ConfigError(
      `JETCRON_DISPATCH=${config.dispatchMode}, but live processes of this deployment send tasks the other way: ${listed(others, (p) => `JETCRON_DISPATCH=${p.dispatch ?? 'queue'}`)}. ` +
        'Both would send the same tasks; stop them first, or start this one with the same JETCRON_DISPATCH',
    );
  }
  const otherMonitors = monitors ? otherMonitorModes(processes, config.monitorOwners) : [];
  if (otherMonitors.length) {
    throw new ConfigError(
      `JETCRON_MONITOR_OWNERS=${config.monitorOwners ? '1' : '0'}, but live processes of this deployment decide pings the other way: ${listed(otherMonitors, (p) => `JETCRON_MONITOR_OWNERS=${p.monitors === 'owners' ? '1' : '0'}`)}. ` +
        'Both would record the same monitors\' pings and deadlines; stop them first, or start this one with the same JETCRON_MONITOR_OWNERS',
    );
  }
}
