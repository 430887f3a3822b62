import { generationalMap } from '../../lib/bounded-map.ts';
import type { CommandMeta } from '../meta.ts';
import { decideMonitor, evolveMonitor, type MonitorCommand } from './decide.ts';
import type { Monitor, MonitorEvent } from './types.ts';

/**
 * Where a command's events are written by a monitor partition's owner: pings and
 * goings down (the traffic) in the partition's commits, many monitors' events in one
 * stored message; a change of the monitor itself (update, pause, resume, delete) on the
 * monitor's own subject, as before, so its last event there always carries its settings
 * (the notifier and the plan's count read them there).
 */
export const committed = (command: MonitorCommand): boolean => command.type === 'Ping' || command.type === 'CheckDeadline';

/** A monitor as its partition's owner holds it. */
export interface Held {
  /** The monitor as its latest event carries it; null once deleted. */
  state: Monitor | null;
  /** The latest event's position in the log (a commit's events share one sequence, told apart by index). */
  seq: number;
  index: number;
  /** The last sequence of the monitor's own subject: what a change written there is guarded by. */
  ownSeq: number;
  /** The id of a decided event whose commit is not stored yet (its position is then unknown). */
  pending: string | null;
  /** How many commit events were met before the latest one, when the latest is in a commit (-1: it is not): its age. */
  ordinal: number;
}

/** What answers a command that was already stored (a retry of the same request): its event and where it is. */
export interface Stored {
  seq: number;
  event: MonitorEvent;
}

/** Commands already stored that a retry can be answered from (at least this many, at most twice): enough for every request of the last minutes. */
const REMEMBERED_ANSWERS = 100_000;

/**
 * A monitor whose latest event sits this many commit events (read back or written)
 * behind the newest is restated, at the least; see `restates`.
 */
export const RESTATE_AFTER_EVENTS = 10_000;

/**
 * The monitors of one partition as its owner holds them, from the log: the latest
 * event of each, wherever it is (its own subject or a partition commit), wins by its
 * position, so reading the last of every monitor subject and the partition's commits
 * in any order gives the same state. Decisions are the monitor decider's; a decision
 * bound for a commit is held at once (the next ping of the same loop turn is decided
 * after it) and placed once its commit is stored. Pure: the owner does the I/O.
 */
export class HeldMonitors {
  private readonly byId = new Map<string, Held>();
  /** Monitors whose latest event is in a partition commit, counted per commit: a takeover must read back to the lowest. */
  private readonly inCommits = new CommitCounts();
  /** Monitor → the commit holding its latest event, when one does. */
  private readonly commitOf = new Map<string, number>();
  /** Event id → where it was stored: a request retried after its commit (the owner died before it answered) gets the same answer. */
  private readonly answers = generationalMap<Stored>(REMEMBERED_ANSWERS);
  /** Commit events met so far (read back from the partition's commits, or held to be written). */
  private metInCommits = 0;
  /**
   * Monitors by the ordinal of a commit event of theirs, oldest first (parallel arrays,
   * read from `head`): an entry whose monitor has a newer event since is passed over.
   */
  private ageIds: string[] = [];
  private ageOrdinals: number[] = [];
  private ageHead = 0;

  private readonly restateAfter: number;

  /** @param restateAfter the least age, in commit events, at which a monitor is restated (`restates`). */
  constructor(restateAfter = RESTATE_AFTER_EVENTS) {
    this.restateAfter = restateAfter;
  }

  get size(): number {
    return this.byId.size;
  }

  get(id: string): Held | undefined {
    return this.byId.get(id);
  }

  /** The monitor, if it exists and is the organization's. */
  stateOf(orgId: string, id: string): Monitor | null {
    const state = this.byId.get(id)?.state ?? null;
    return state && state.org_id === orgId ? state : null;
  }

  /**
   * An event read from the log: on the monitor's own subject (`own`) or in a partition
   * commit. Applied when it is newer than what is held; returns whether it was.
   */
  read(id: string, seq: number, index: number, event: MonitorEvent, own: boolean): boolean {
    this.answers.set(event.id, { seq, event });
    // Counted whether it wins or not: what a takeover reads back is every commit event.
    const ordinal = own ? -1 : this.metInCommits++;
    const h = this.byId.get(id);
    if (h && own && seq > h.ownSeq) h.ownSeq = seq;
    if (h && (h.pending !== null || seq < h.seq || (seq === h.seq && index <= h.index))) return false;
    this.place(id, evolveMonitor(null, event), seq, index, own ? seq : h?.ownSeq ?? 0, ordinal);
    return true;
  }

  /** A monitor loaded from its own subject (not held yet: created a moment ago, or never seen); null = nothing there. */
  loaded(id: string, stored: { seq: number; event: MonitorEvent } | null): void {
    if (!stored) return;
    this.read(id, stored.seq, 0, stored.event, true);
  }

  /** The events a command makes of the held monitor (none: nothing to do); throws the decider's refusals. */
  decide(orgId: string, id: string, command: MonitorCommand, meta: CommandMeta): MonitorEvent[] {
    return decideMonitor(command, this.stateOf(orgId, id), meta);
  }

  /** A decision bound for a commit, held at once: its monitor is as it says from now on, its position set once stored. */
  hold(id: string, event: MonitorEvent): void {
    const h = this.byId.get(id);
    const ordinal = this.metInCommits++;
    // Out of the commits' count until stored: its commit's position is not known yet, and comes after every other.
    this.place(id, evolveMonitor(h?.state ?? null, event), h?.seq ?? 0, h?.index ?? 0, h?.ownSeq ?? 0, -1);
    const held = this.byId.get(id)!;
    held.pending = event.id;
    held.ordinal = ordinal;
    this.aged(id, ordinal);
  }

  /** The commit holding a held decision is stored at `seq`. */
  stored(id: string, event: MonitorEvent, seq: number, index: number): void {
    this.answers.set(event.id, { seq, event });
    const h = this.byId.get(id);
    if (!h || h.pending !== event.id) return;
    h.pending = null;
    h.seq = seq;
    h.index = index;
    this.inCommit(id, seq);
  }

  /** Where a request's event was stored, if it was (its id is the request's). */
  answered(eventId: string): Stored | undefined {
    return this.answers.get(eventId);
  }

  /**
   * The lowest position a takeover must read from to find every monitor whose latest
   * event is in a commit; null when none is.
   */
  lowestCommit(): number | null {
    return this.inCommits.lowest();
  }

  /**
   * The anchor of a takeover's read: a restatement, in the next commit, of each monitor
   * whose latest event is a commit event more than `max(restateAfter, 2 × monitors held)`
   * commit events old (a monitor pinged once and never since, one down and left so). So a
   * takeover, which reads the commits back from the oldest one holding some monitor's
   * latest event, reads at most that many events (and a turn's) whatever the monitors'
   * silences. Each restatement follows at least that many other commit events, so they
   * add at most half an event to each event otherwise written, and nothing while the
   * partition writes nothing. A monitor with a decision on its way, or deleted, is not
   * restated, nor yet one whose change is being written on its own subject (`busy`). The
   * events are not held: the caller commits each (`hold`), as a ping's. Asked at every
   * commit: `now` is read only when one is due.
   */
  restates(now: () => string, busy: (id: string) => boolean = () => false): MonitorEvent[] {
    const bound = Math.max(this.restateAfter, 2 * this.byId.size);
    const out: MonitorEvent[] = [];
    const later: number[] = [];
    while (this.ageHead < this.ageIds.length && this.ageOrdinals[this.ageHead]! < this.metInCommits - bound) {
      const id = this.ageIds[this.ageHead]!;
      const ordinal = this.ageOrdinals[this.ageHead]!;
      this.ageHead++;
      const h = this.byId.get(id);
      // Passed over: a newer event since (its own entry is further on), on its way, on its own subject, or gone.
      if (!h || h.ordinal !== ordinal || h.pending !== null || !this.commitOf.has(id) || !h.state) continue;
      // A change of it being written on its own subject: restated now, the restatement could
      // land after the change and a takeover would hold the monitor as before it. Asked
      // again at a later commit (the change, once stored, makes it needless).
      if (busy(id)) {
        later.push(this.ageHead - 1);
        continue;
      }
      out.push({
        type: 'MonitorRestated',
        id: `${id}.restated.${h.seq}.${h.index}`,
        at: now(),
        org_id: h.state.org_id,
        data: { monitor: h.state, restated_seq: h.seq },
      });
    }
    for (const at of later) this.aged(this.ageIds[at]!, this.ageOrdinals[at]!);
    if (this.ageHead > 1024 && this.ageHead * 2 > this.ageIds.length) {
      this.ageIds = this.ageIds.slice(this.ageHead);
      this.ageOrdinals = this.ageOrdinals.slice(this.ageHead);
      this.ageHead = 0;
    }
    return out;
  }

  *monitors(): IterableIterator<[string, Held]> {
    yield* this.byId;
  }

  /** `ordinal` ≥ 0: the latest event is a commit event, met as the ordinal-th. */
  private place(id: string, state: Monitor | null, seq: number, index: number, ownSeq: number, ordinal: number): void {
    const h = this.byId.get(id);
    // In place: a monitor pinged all along is held by one object, not a new one per ping.
    if (h) Object.assign(h, { state, seq, index, ownSeq, pending: null, ordinal });
    else this.byId.set(id, { state, seq, index, ownSeq, pending: null, ordinal });
    this.inCommit(id, ordinal >= 0 ? seq : null);
    if (ordinal >= 0) this.aged(id, ordinal);
  }

  private aged(id: string, ordinal: number): void {
    this.ageIds.push(id);
    this.ageOrdinals.push(ordinal);
  }

  private inCommit(id: string, seq: number | null): void {
    const before = this.commitOf.get(id);
    if (before === seq) return;
    if (before !== undefined) this.inCommits.remove(before);
    if (seq === null) this.commitOf.delete(id);
    else {
      this.commitOf.set(id, seq);
      this.inCommits.add(seq);
    }
  }
}

/**
 * How many monitors have their latest event in each commit, the lowest first. Commits
 * are met in log order (read back in order, then written in order), so a new one goes
 * at the end and the lowest is found by passing the emptied ones at the front: no heap.
 */
class CommitCounts {
  private seqs: number[] = [];
  private head = 0;
  private readonly counts = new Map<number, number>();

  add(seq: number): void {
    const n = this.counts.get(seq);
    if (n === undefined) {
      // Out of order only if an older commit is read after a newer one: keep the list sorted then.
      if (this.seqs.length > this.head && seq < this.seqs[this.seqs.length - 1]!) this.insertSorted(seq);
      else this.seqs.push(seq);
    }
    this.counts.set(seq, (n ?? 0) + 1);
  }

  remove(seq: number): void {
    const n = this.counts.get(seq);
    if (n === undefined) return;
    if (n <= 1) this.counts.delete(seq);
    else this.counts.set(seq, n - 1);
  }

  lowest(): number | null {
    while (this.head < this.seqs.length && !this.counts.has(this.seqs[this.head]!)) this.head++;
    // Emptied commits behind a live one stay listed until the list is twice what is live: then it is rebuilt.
    if (this.seqs.length - this.head > 2 * this.counts.size + 1024) {
      this.seqs = this.seqs.slice(this.head).filter((seq) => this.counts.has(seq));
      this.head = 0;
    }
    return this.head < this.seqs.length ? this.seqs[this.head]! : null;
  }

  private insertSorted(seq: number): void {
    let i = this.seqs.length;
    while (i > this.head && this.seqs[i - 1]! > seq) i--;
    this.seqs.splice(i, 0, seq);
  }
}
