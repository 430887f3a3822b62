import pLimit from 'p-limit';
import type { AttemptResult } from '../commands/execution/types.ts';
import { createAttemptRunner } from '../dispatchers/attempt-runner.ts';
import { openHostBlocks, type HostBlocks } from '../dispatchers/host-blocks.ts';
import type { OutboundClient } from '../dispatchers/outbound-client.ts';
import type { EventStore } from '../commands/store.ts';
import type { Clock } from '../lib/clock.ts';
import type { Log } from '../lib/logger.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { startConsumers, type LeasedConsumer } from '../nats/consumer-kit.ts';
import type { Directory } from '../nats/org-directory.ts';
import type { ScriptEngine } from '../scripts/engine.ts';
import { ownTaskPartition } from './task-owner.ts';
import type { OwnedTasks } from '../commands/partition/owned-tasks.ts';
import { answerFlowStats } from './flow-stats.ts';

export interface TaskOwnersDeps {
  nats: Nats;
  store: EventStore;
  directory: Directory;
  outbound: OutboundClient;
  clock: Clock;
  log: Log;
  owner: string;
  partitions: number;
  concurrency: number;
  scripts?: ScriptEngine;
  onAttemptFinished?: (result: AttemptResult, exchangeMs: number | null) => void;
  /** Each partition's owner reports how far it has read EVENTS (`/healthz`: its lag, stuck when not moving). */
  supervisor?: Pick<Supervisor, 'progress'>;
}

/** The lease of a task partition's owner. */
export const ownerLease = (partition: number) => `owner.${partition}`;

/**
 * Every task partition this process can lease, each owned while its lease holds (a
 * process takes what no live one holds, so one process owns them all until another
 * starts and takes over those it frees). One bound on attempts in flight for all.
 */
export async function startTaskOwners(deps: TaskOwnersDeps) {
  const hosts: HostBlocks = await openHostBlocks({ nats: deps.nats, clock: deps.clock, log: deps.log });
  const runner = createAttemptRunner({ directory: deps.directory, outbound: deps.outbound, clock: deps.clock, log: deps.log, scripts: deps.scripts, hosts: () => hosts });
  const slots = pLimit(deps.concurrency);
  const held = new Map<number, OwnedTasks>();
  const stopStats = answerFlowStats(deps.nats, held);
  const owners = startConsumers(deps, Array.from({ length: deps.partitions }, (_, p): LeasedConsumer => ({
    lease: ownerLease(p),
    term: (signal, _opened, lease) => ownTaskPartition({ ...deps, runner, hosts: () => hosts, slots, progress: deps.supervisor?.progress(ownerLease(p), 'EVENTS') }, p, lease, signal, held),
  })));
  return {
    hostBlocksActive: () => hosts.activeBlocks(),
    /** Executions of the partitions owned here that wait for their time (the timers gauge counts them). */
    waitingForTime(now = Date.now()): number {
      let n = 0;
      for (const state of held.values()) n += state.waitingForTime(now);
      return n;
    },
    /** What the flow-control keys of the partitions owned here hold, summed per organization (the metrics' gauges). */
    flowLoad(): Map<string, { waiting: number; in_flight: number; paused: number }> {
      const out = new Map<string, { waiting: number; in_flight: number; paused: number }>();
      for (const state of held.values()) {
        for (const k of state.allFlowKeys()) {
          const sum = out.get(k.org_id) ?? { waiting: 0, in_flight: 0, paused: 0 };
          sum.waiting += k.waiting;
          sum.in_flight += k.in_flight;
          if (k.paused) sum.paused++;
          out.set(k.org_id, sum);
        }
      }
      return out;
    },
    async stop() {
      stopStats();
      await owners.stop();
      await hosts.close();
    },
  };
}
