import type { EventStore } from '../events/store.ts';
import type { Clock } from '../lib/clock.ts';
import type { Nats } from '../nats/connection.ts';
import type { Supervisor } from '../nats/supervisor.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { jobMsgId, type Job } from '../commands/execution/job.ts';
import { encodeJson } from '../lib/json.ts';
import { createLanes } from './lanes.ts';
import { recordDeadline } from './monitor-deadlines.ts';
import { startMonitorDeadlines, type DeadlineCounts } from './monitor-deadline-keeper.ts';
import { createMonitorOwnerClient } from '../owners/monitor-client.ts';
import { recordTick } from './schedule-ticks.ts';
import { timerPartition } from './timer-partition.ts';
import { startConsumers } from '../nats/consumer-kit.ts';
import type { TimerHeap } from '../lib/timer-heap.ts';
import { createTimerStore } from './timer-store.ts';
import { startTranslator } from './translator.ts';
import { createHeld } from './held.ts';
import { createEndpointDirectory } from '../inbound/endpoint-directory.ts';
import { noHooks, type HooksFor } from '../inbound/pipeline.ts';
import { startInboundRouter } from '../inbound/router.ts';

/** The scheduler role: the translator, the inbound router and the monitors' deadline keeper (one active each) and every timer partition it can lease. */
export async function startScheduler(deps: {
  nats: Nats;
  store: EventStore;
  clock: Clock;
  owner: string;
  partitions: number;
  log: (m: string) => void;
  supervisor: Supervisor;
  hooks?: HooksFor;
  ownersHaveTasks?: boolean;
  /** Monitor partition owners hold the monitors (JETCRON_MONITOR_OWNERS=1, in the API processes), in as many partitions as this: they keep the deadlines, no keeper. */
  monitorPartitions?: number;
}) {
  const timers = createTimerStore(deps.nats, deps.partitions);
  // A deadline timer of before the keeper, fired now, is decided by the monitor's owner like any command of it.
  const monitorOwners = deps.monitorPartitions ? createMonitorOwnerClient({ nats: deps.nats, partitions: deps.monitorPartitions }) : undefined;
  const lanes = await createLanes(deps.nats, deps.store);
  const start = async (job: Job) => {
    // A timer armed before the partition owners took tasks and schedules over: the owners hold that work now.
    if (deps.ownersHaveTasks && job.kind !== 'deadline' && (job.source.type === 'task' || job.source.type === 'schedule')) return;
    if (job.kind === 'tick') return recordTick(deps, job);
    if (job.kind === 'deadline') return recordDeadline(monitorOwners ? { ...deps, monitorOwners } : deps, job);
    if (job.kind === 'attempt' && job.attempt === 1 && job.lane) return lanes.enqueue({ ...job, lane: job.lane });
    await deps.nats.publish(SUBJECTS.dispatch(job.org_id), encodeJson(job), { msgId: jobMsgId(job) });
  };
  const translator = startTranslator({ ...deps, timers, lanes, held: createHeld(deps.nats), start });
  const endpoints = createEndpointDirectory(deps.nats, deps.store, null);
  const router = startInboundRouter({ ...deps, endpoints, hooks: deps.hooks ?? noHooks });
  const owned = new Set<TimerHeap<Job>>();
  // With monitor owners (in the API processes) the deadlines are theirs: no keeper here.
  const deadlines = deps.monitorPartitions ? { counts: (): DeadlineCounts | null => null, stop: async () => {} } : startMonitorDeadlines(deps);
  const partitions = startConsumers(deps, Array.from({ length: deps.partitions }, (_, p) =>
    timerPartition(p, { timers, start, log: deps.log, supervisor: deps.supervisor, nats: deps.nats, owned })));
  return {
    /** Armed timers in the partitions this process owns and the monitor deadlines it keeps, and how many of them are past due. */
    timers(now = Date.now()): { pending: number; overdue: number } {
      const kept = deadlines.counts(now);
      let pending = kept?.armed ?? 0;
      let overdue = kept?.overdue ?? 0;
      for (const heap of owned) {
        pending += heap.size;
        overdue += heap.countDue(now);
      }
      return { pending, overdue };
    },
    /** The monitor deadlines this process keeps; null when another process holds the keeper's lease. */
    monitorDeadlines: (now = Date.now()): DeadlineCounts | null => deadlines.counts(now),
    async stop() {
      await Promise.all([translator.stop(), router.stop(), deadlines.stop(), partitions.stop()]);
      endpoints.close();
    },
  };
}
