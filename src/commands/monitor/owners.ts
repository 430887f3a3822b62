import type { Decided } from '../execute.ts';
import type { MonitorCommand } from './decide.ts';
import type { Monitor, MonitorEvent } from './types.ts';

/**
 * Where commands on existing monitors are decided: the monitor partition owners, which
 * hold the monitors. This is the asking side, given to the command
 * handlers as a dependency so they stay free of NATS. Answers as `execute` does: what
 * was stored, the monitor after it, and where.
 */
export interface MonitorOwners {
  run(orgId: string, id: string, command: MonitorCommand): Promise<Decided<Monitor, MonitorEvent>>;
  /** A monitor this process created (its create stored at `seq`): its owner, if here, holds it from now (owners read no creates from the log once live). */
  created(orgId: string, event: MonitorEvent, seq: number): void;
}
