import { TimerHeap } from '../../lib/timer-heap.ts';
import type { Schedule } from '../schedule/types.ts';

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
