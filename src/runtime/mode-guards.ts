import { ConfigError, type Config } from '../config.ts';
import type { Nats } from '../nats/connection.ts';
import { rollCall, type ProcessInfo } from '../nats/roll-call.ts';

/** The roles whose work depends on the mode: the translator and timers (scheduler), the senders (dispatcher). */
const MODE_ROLES = new Set(['scheduler', 'dispatcher']);
/** How long the roll call waits for the first answer, and for the next once answers come. */
const WAIT_MS = 2_000;
const STALL_MS = 150;

/** Live processes whose tasks go another way than `mode`: both would send them (twice, lanes overlapping). */
export function otherModes(processes: ProcessInfo[], mode: Config['dispatchMode']): ProcessInfo[] {
  return processes.filter((p) => p.roles.some((r) => MODE_ROLES.has(r)) && (p.dispatch ?? 'queue') !== mode);
}

/**
 * Refuses to start a process that would send tasks one way while live processes of the
 * deployment send them the other: a switch of JETCRON_DISPATCH stops them all first.
 * Two processes started at the same instant in different modes are not caught (each
 * asks before the other answers).
 */
export async function guardDispatchMode(nats: Nats, config: Pick<Config, 'dispatchMode' | 'roles'>): Promise<void> {
  if (![...config.roles].some((r) => MODE_ROLES.has(r))) return;
  const others = otherModes(await rollCall(nats, WAIT_MS, STALL_MS), config.dispatchMode);
  if (others.length === 0) return;
  const named = others.slice(0, 3).map((p) => `pid ${p.pid} on ${p.host} (${p.roles.join(',')}, JETCRON_DISPATCH=${p.dispatch ?? 'queue'})`).join('; ');
  throw new ConfigError(
    `JETCRON_DISPATCH=${config.dispatchMode}, but live processes of this deployment send tasks the other way: ${named}` +
      `${others.length > 3 ? ` and ${others.length - 3} more` : ''}. Both would send the same tasks; stop them first, or start this one with the same JETCRON_DISPATCH`,
  );
}
