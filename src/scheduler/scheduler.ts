import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import type { Nats } from '../nats/connection.ts';
import { openLeaseBucket } from '../nats/lease.ts';
import { runTimerPartition } from './timer-partition.ts';
import { createTimerStore } from './timer-store.ts';
import { startTranslator } from './translator.ts';

/** The scheduler role: the translator (one active) and every timer partition it can lease. */
export async function startScheduler(deps: {
  nats: Nats;
  store: EventStore;
  clock: Clock;
  owner: string;
  partitions: number;
  log: (m: string) => void;
}) {
  const timers = createTimerStore(deps.nats, deps.partitions);
  const translator = startTranslator({ ...deps, timers });
  const leases = await openLeaseBucket(deps.nats);
  const abort = new AbortController();
  const partitions = Array.from({ length: deps.partitions }, (_, p) =>
    runTimerPartition(p, { nats: deps.nats, timers, leases, owner: deps.owner, log: deps.log }, abort.signal),
  );
  return {
    async stop() {
      abort.abort();
      await Promise.all([translator.stop(), ...partitions]);
    },
  };
}
