import { TimerHeap } from '../../lib/timer-heap.ts';
import { PARKED, planned } from '../execution/lifecycle.ts';
import { scheduleAttemptJob } from '../execution/schedule-jobs.ts';
import type { Schedule, ScheduleEvent } from '../schedule/types.ts';
import { ExecutionIndex, logOrder, type HeldExecutions, type OwnedExecution, type RetryOf } from './held-executions.ts';
import { schedulePartition } from './partition-of.ts';

/** A schedule's tick that has come due: the owner records it (`recordTick`), which plans its execution. */
export interface DueTick {
  orgId: string;
  scheduleId: string;
  tickAt: string;
}

/**
 * The schedules of one partition as its owner knows them, each as of the latest event
 * of it read (a later sequence wins; null = deleted), and the timer of each one's next
 * tick. A tick handed out (`dueTicks`) is out of the timers until a state of its
 * schedule comes back: its `ScheduleTicked` read from the log, or the state its
 * recording found (`settled`); a recording that failed is tried again (`retryAt`).
 */
export class ScheduleStates {
  private readonly states = new Map<string, { schedule: Schedule | null; seq: number }>();
  private readonly ticks = new TimerHeap<DueTick>();
  /** Each arming's own number: the heap keeps only a key's latest arming live. */
  private armings = 0;

  /** undefined: not known; null: deleted. */
  get(scheduleId: string): Schedule | null | undefined {
    return this.states.get(scheduleId)?.schedule;
  }

  /**
   * A schedule as of the event at `seq`: kept when it is not older than the one known
   * (the same state found again re-arms its tick). Returns whether it was kept.
   */
  learn(scheduleId: string, schedule: Schedule | null, seq: number): boolean {
    const known = this.states.get(scheduleId);
    if (known && known.seq > seq) return false;
    this.states.set(scheduleId, { schedule, seq });
    if (schedule?.enabled && schedule.next_run_at) {
      this.ticks.set(scheduleId, ++this.armings, Date.parse(schedule.next_run_at), { orgId: schedule.org_id, scheduleId, tickAt: schedule.next_run_at });
    } else {
      this.ticks.delete(scheduleId);
    }
    return true;
  }

  /** The ticks due at `now`, each handed out once. */
  dueTicks(now: number): DueTick[] {
    return this.ticks.popDue(now).map((t) => t.value);
  }

  /** A tick's recording failed for a reason of our own (the store unreachable): it is due again at `at`. */
  retryAt(tick: DueTick, at: number): void {
    const known = this.states.get(tick.scheduleId);
    if (known?.schedule?.next_run_at !== tick.tickAt) return;
    this.ticks.set(tick.scheduleId, ++this.armings, at, tick);
  }

  /** When the earliest tick is due; null when none is armed. */
  nextDueAt(): number | null {
    return this.ticks.peekDue() ?? null;
  }
}

/**
 * One partition's schedules and their live executions (ticks' and triggers'), as its
 * owner holds them. Each schedule event carries the schedule as it is: its next tick is
 * armed from it. A tick or a trigger plans an execution (lane-free, due at its
 * `scheduled_for`); a change moves the executions that wait for a retry onto the new
 * definition (parked while disabled, unless triggered); a delete cancels them.
 */
export class ScheduleRuns {
  readonly states = new ScheduleStates();
  private readonly runs = new ExecutionIndex();
  private readonly held: HeldExecutions;

  constructor(held: HeldExecutions) {
    this.held = held;
  }

  /** A schedule's last event, read at a takeover before the log: its state, and nothing planned. */
  know(event: ScheduleEvent, seq: number): void {
    const schedule = event.data.schedule;
    if (schedulePartition(event.org_id, schedule.id, this.held.partitions) !== this.held.partition) return;
    this.states.learn(schedule.id, event.type === 'ScheduleDeleted' ? null : schedule, seq);
  }

  /** A schedule's event (any partition's: those of other partitions are ignored). */
  onEvent(event: ScheduleEvent, seq: number, index: number, traceparent?: string): void {
    const schedule = event.data.schedule;
    if (schedulePartition(event.org_id, schedule.id, this.held.partitions) !== this.held.partition) return;
    // An older event than the state known (a takeover read each schedule's last event
    // first) changes no state, but a tick's or a trigger's execution is planned all the same.
    // A trigger decided outside the schedule's subject (a bulk job's) carries the state at `source_seq`.
    const stateSeq = event.type === 'ScheduleTriggered' ? event.data.source_seq ?? seq : seq;
    this.states.learn(schedule.id, event.type === 'ScheduleDeleted' ? null : schedule, stateSeq);
    switch (event.type) {
      case 'ScheduleTicked':
      case 'ScheduleTriggered': {
        const run = event.data.execution;
        if (this.held.get(run.id)) return;
        // The run as decided (the schedule it carries), even if the schedule changed since.
        const exec: OwnedExecution = {
          ...planned(scheduleAttemptJob(schedule, run, 1)), id: run.id, sourceId: schedule.id, forward: null, triggered: event.type === 'ScheduleTriggered',
          origin: seq, order: logOrder(seq, index), adopt: null, traceparent,
        };
        this.runs.add(schedule.id, exec.id);
        this.held.admit(exec, null, Date.parse(run.scheduled_for));
        // Deleted after the state a trigger was decided on (a bulk job's): never sent, its cancellation recorded.
        if (!this.states.get(schedule.id)) this.held.cancelWaiting(exec, 'schedule deleted', Date.parse(event.at));
        return;
      }
      case 'ScheduleUpdated':
      // Destination health turned it off: what waits for a retry is parked, as for an owner's update.
      case 'ScheduleDisabled': {
        // As the schedule is now (this event, or a later state already known).
        const now = this.states.get(schedule.id);
        if (!now) return;
        for (const id of this.runs.of(schedule.id)) {
          const exec = this.held.get(id)!;
          if (exec.phase !== 'queued') continue;
          exec.job = scheduleAttemptJob(now, { id, scheduled_for: exec.job.scheduled_for, callback_url: exec.job.push_callback_url }, exec.job.attempt);
          this.held.queues.reschedule(id, exec.triggered || now.enabled ? Date.parse(exec.job.scheduled_for) : PARKED, exec.order);
        }
        return;
      }
      case 'ScheduleDeleted':
        for (const id of this.runs.of(schedule.id)) {
          const exec = this.held.get(id)!;
          if (exec.phase === 'queued') this.held.cancelWaiting(exec, 'schedule deleted', Date.parse(event.at));
        }
        return;
      case 'ScheduleCreated':
      case 'ScheduleTicksMissed':
      case 'ScheduleFailureCounted':
      case 'ScheduleFailuresReset':
        return;
    }
  }

  /** Whether the execution's schedule was deleted. */
  gone(exec: OwnedExecution): boolean {
    return !this.states.get(exec.sourceId);
  }

  /** The next attempt as the schedule is now; null when it is gone. */
  retryOf: RetryOf = (exec, attempt, at, pushCallback) => {
    const schedule = this.states.get(exec.sourceId);
    return schedule ? { job: scheduleAttemptJob(schedule, { id: exec.id, scheduled_for: at, callback_url: pushCallback }, attempt), enabled: schedule.enabled } : null;
  };

  /** The execution is over here. */
  forget(exec: OwnedExecution): void {
    this.runs.remove(exec.sourceId, exec.id);
  }
}
