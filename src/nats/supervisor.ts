import { describeError, isTransient } from '../lib/transient.ts';
import type { Metrics } from '../lib/metrics.ts';
import type { Nats } from './connection.ts';
import { itemName, openFailureLedger, type FailureLedger, type FailureRecord } from './failure-ledger.ts';

/** Tries of one item that fail the same, non-transient way before it is recorded and skipped. */
export const POISON_AFTER = 3;
// Short: a store coming back from an election should be used within a couple of seconds.
const TRANSIENT_WAIT_MAX_MS = 2_000;
const FIRST_FAILURES_KEPT = 10_000;

/** What a consumer knows of the item it failed on. */
export interface FailedItem {
  stream: string;
  seq: number;
  subject: string;
  /** Work-queue jobs: the message, kept in the record so a retry can republish it. */
  payload?: Uint8Array;
  /** One event of a commit (the message holds several), failed on its own: the record names it. */
  event?: FailedEvent;
}

/** An event inside a stored message: its place in the message, its id and type. */
export interface FailedEvent {
  index: number;
  id: string;
  type: string;
}

export type Verdict = { skip: true } | { skip: false; waitMs: number };

/**
 * Where a consumer stands, for `/healthz` and `/metrics`: whether this process runs it
 * (holds its lease), the last position it finished, and whether it is failing.
 */
export class ConsumerProgress {
  active = false;
  position = 0;
  lastProgressAt = Date.now();
  failingSince: number | null = null;
  lastError: string | null = null;
  skipped = 0;
  /** Timer partitions: the due time of the earliest timer still waiting to fire. */
  oldestDueAt: number | null = null;

  readonly consumer: string;
  readonly stream: string | null;

  constructor(consumer: string, stream: string | null) {
    this.consumer = consumer;
    this.stream = stream;
  }

  /** This process took the consumer over (its lease), at `position`. */
  started(position: number): void {
    this.active = true;
    this.position = position;
    this.lastProgressAt = Date.now();
    this.failingSince = null;
    this.lastError = null;
  }

  stopped(): void {
    this.active = false;
  }

  advanced(position: number): void {
    if (position > this.position) this.position = position;
    this.lastProgressAt = Date.now();
    this.failingSince = null;
    this.lastError = null;
  }

  failing(err: string): void {
    this.failingSince ??= Date.now();
    this.lastError = err;
  }
}

export interface Supervisor {
  ledger: FailureLedger;
  /**
   * After a failed try of `item` (the `tries`-th in a row): wait and try again, or —
   * once a non-transient failure has repeated POISON_AFTER times — record it in the
   * ledger and skip it. A transient failure (a store down) is retried forever.
   * Never rejects: a record that cannot be written is a "try again".
   */
  failed(consumer: string, item: FailedItem, err: unknown, tries: number): Promise<Verdict>;
  progress(consumer: string, stream: string | null): ConsumerProgress;
  consumers(): ConsumerProgress[];
  log: (m: string) => void;
}

/** Without `metrics` (the CLI's replay and rebuild, tests) nothing is counted. */
export function createSupervisor(deps: { ledger: FailureLedger; metrics?: Metrics; log: (m: string) => void }): Supervisor {
  const progresses = new Map<string, ConsumerProgress>();
  const progress = (consumer: string, stream: string | null) => {
    let p = progresses.get(consumer);
    if (!p) progresses.set(consumer, (p = new ConsumerProgress(consumer, stream)));
    return p;
  };
  const firstFailedAt = new Map<string, string>();

  deps.metrics?.consumerFailuresRecorded.readFrom(() => {
    const counts = new Map<string, number>();
    for (const r of deps.ledger.list()) counts.set(r.consumer, (counts.get(r.consumer) ?? 0) + 1);
    return [...counts].map(([consumer, n]) => [{ consumer }, n]);
  });

  return {
    ledger: deps.ledger,
    log: deps.log,
    progress,
    consumers: () => [...progresses.values()],
    async failed(consumer, item, err, tries) {
      const p = progress(consumer, item.stream);
      const error = describeError(err);
      const name = itemName({ seq: item.seq, index: item.event?.index });
      // An event of a commit counts from its message's first failure (it failed inside it first).
      const key = `${consumer}.${item.seq}`;
      if (!firstFailedAt.has(key)) {
        firstFailedAt.set(key, new Date().toISOString());
        // Items that failed and then passed are never told here: keep the memory bounded.
        if (firstFailedAt.size > FIRST_FAILURES_KEPT) firstFailedAt.delete(firstFailedAt.keys().next().value!);
      }
      p.failing(error);
      deps.metrics?.consumerErrors.inc({ consumer, kind: isTransient(err) ? 'transient' : 'permanent' });
      if (isTransient(err) || tries < POISON_AFTER) {
        const waitMs = Math.min(250 * 2 ** Math.min(tries, 10), TRANSIENT_WAIT_MAX_MS);
        deps.log(`${consumer}: ${name} (${item.subject}) failed (try ${tries}${isTransient(err) ? ', transient' : ''}), again in ${waitMs} ms: ${error}`);
        return { skip: false, waitMs };
      }
      const record: Omit<FailureRecord, 'state' | 'skipped_at'> = {
        consumer, stream: item.stream, seq: item.seq,
        ...(item.event ? { index: item.event.index, event_id: item.event.id, event_type: item.event.type } : {}),
        subject: item.subject, error, attempts: tries,
        first_failed_at: firstFailedAt.get(key)!,
        ...(item.payload ? { payload: Buffer.from(item.payload).toString('base64') } : {}),
      };
      try {
        await deps.ledger.record(record);
      } catch (recordErr) {
        // Not recorded, not skipped: a skip is never silent.
        deps.log(`${consumer}: ${name} could not be recorded as failed (${describeError(recordErr)}); trying it again`);
        return { skip: false, waitMs: 1000 };
      }
      // Another event of the same commit may be recorded next: its message's time stays.
      if (!item.event) firstFailedAt.delete(key);
      p.skipped++;
      p.failingSince = null;
      deps.metrics?.consumerSkipped.inc({ consumer });
      const which = item.event ? ` (${item.event.type} ${item.event.id}, one event of its commit)` : '';
      deps.log(`ERROR ${consumer}: SKIPPED ${name}${which} (${item.subject}) after ${tries} failed tries: ${error}. Recorded in KV failures; \`jetcron projections retry\` runs it again after a fix`);
      return { skip: true };
    },
  };
}

/** A supervisor of its own, for processes outside `serve` (the CLI's replay, tests). */
export async function openSupervisor(nats: Nats, log: (m: string) => void): Promise<Supervisor & { close(): void }> {
  const ledger = await openFailureLedger(nats, log);
  return { ...createSupervisor({ ledger, log }), close: () => ledger.close() };
}

/** Runs `work` until it succeeds or the supervisor skips it; false when skipped or stopped. */
export async function untilDoneOrSkipped(
  supervisor: Supervisor,
  consumer: string,
  item: FailedItem,
  work: () => Promise<void>,
  stopped: () => boolean,
): Promise<boolean> {
  for (let tries = 1; ; tries++) {
    try {
      await work();
      return true;
    } catch (err) {
      if (stopped()) return false;
      const verdict = await supervisor.failed(consumer, item, err, tries);
      if (verdict.skip) return false;
      await new Promise((r) => setTimeout(r, verdict.waitMs));
      if (stopped()) return false;
    }
  }
}
