/**
 * The tasks of a partition its owner knows to be deleted or cancelled, for triggers
 * decided outside their task's subject (a bulk job's group on the jobs subject, which
 * no guard of the task's subject covers): such a trigger carries the sequence of the
 * task's state it was decided on (`source_seq`), and a delete the owner read since then
 * wins over it (the execution is cancelled unsent).
 *
 * What the owner read of the log covers the deletes from its reading's start on; it
 * keeps the latest `limit` of them (oldest dropped first), so it knows every delete at
 * or after `horizon`. A trigger decided on a state older than that (a takeover reading
 * from later, or many deletes since) asks the owner to read the task's last event
 * first (`learned`), as a delivery of an unknown endpoint does.
 */
export class TaskFates {
  /** Task id → why it is gone (null: known not gone, from a read of its last event) and the sequence that says so; oldest first. */
  private readonly fates = new Map<string, { gone: string | null; seq: number; fromLog: boolean }>();
  private horizon: number;
  private readonly limit: number;

  /** `readsFrom`: the first sequence the owner reads. */
  constructor(readsFrom: number, limit = 20_000) {
    this.horizon = readsFrom;
    this.limit = limit;
  }

  /** Read in the log at `seq`: the task was deleted or cancelled (`reason`). */
  gone(taskId: string, reason: string, seq: number): void {
    this.keep(taskId, { gone: reason, seq, fromLog: true });
  }

  /** The task's last event as read now (`gone` null: it still exists). */
  learned(taskId: string, gone: string | null, seq: number): void {
    const known = this.fates.get(taskId);
    if (known?.gone) return;
    this.keep(taskId, { gone, seq, fromLog: false });
  }

  /**
   * Of a trigger decided on the task's state at `sourceSeq`: why the task is gone, null
   * when it is not, undefined when the owner cannot tell without reading it.
   */
  fate(taskId: string, sourceSeq: number): string | null | undefined {
    const known = this.fates.get(taskId);
    if (known) return known.gone;
    return sourceSeq + 1 >= this.horizon ? null : undefined;
  }

  private keep(taskId: string, fate: { gone: string | null; seq: number; fromLog: boolean }): void {
    this.fates.delete(taskId);
    this.fates.set(taskId, fate);
    if (this.fates.size <= this.limit) return;
    const [oldestId, oldest] = this.fates.entries().next().value!;
    this.fates.delete(oldestId);
    // A delete read in the log and forgotten: what is older than the next one is no longer known.
    if (oldest.fromLog) this.horizon = Math.max(this.horizon, oldest.seq + 1);
  }
}
