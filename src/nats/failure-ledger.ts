import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import { describeError } from '../lib/transient.ts';
import type { Nats } from './connection.ts';
import { watchForever } from './kv-watch.ts';

/**
 * One item a consumer gave up on: the event (or job) it failed on the same
 * way several times, and why. Kept in KV `failures` under `<consumer>.<seq>` (one event
 * of a commit: `<consumer>.<seq>.<index>`) until a retry succeeds, so the skip is never
 * silent and can be undone after a fix.
 */
export interface FailureRecord {
  consumer: string;
  stream: string;
  seq: number;
  /**
   * One event of a commit, skipped while the commit's other events were applied: its
   * place in the message, and its id and type. Absent: the whole message (a message of
   * one event, and every record written before events of a commit were recorded apart).
   */
  index?: number;
  event_id?: string;
  event_type?: string;
  subject: string;
  error: string;
  /** Tries before the skip (and any failed retries since). */
  attempts: number;
  first_failed_at: string;
  skipped_at: string;
  /** `retry`: asked for by `jetcron projections retry`; `retrying`: a process has taken it. */
  state: 'skipped' | 'retry' | 'retrying';
  /**
   * The message itself (base64) for consumers whose stream forgets it once handled
   * (the NOTIFY work queue); a retry republishes it to `subject`. Log readers leave it
   * out: their retry reads the event back from the stream by `seq`.
   */
  payload?: string;
  retries?: number;
}

export type Reapply = (record: FailureRecord) => Promise<void>;

export interface FailureLedger {
  record(record: Omit<FailureRecord, 'state' | 'skipped_at'>): Promise<void>;
  /** Every record, as last seen through the bucket's watch. */
  list(): FailureRecord[];
  /**
   * Runs `reapply` for each record of `consumer` asked to retry, now and as requests
   * arrive, until the returned function is called. Each request is claimed on its KV
   * revision first, so one process runs it even when several serve the consumer.
   */
  serveRetries(consumer: string, reapply: Reapply, log: (m: string) => void): () => void;
  close(): void;
}

/** KV keys allow `[-/_=.a-zA-Z0-9]`; consumer names become one token of it. */
export function failureKey(consumer: string, seq: number, index?: number): string {
  return `${consumer.replace(/[^-_a-zA-Z0-9]/g, '_')}.${seq}${index === undefined ? '' : `.${index}`}`;
}

/** `seq 12` for a whole message, `seq 12 #3` for one event of a commit: how logs name a record's item. */
export function itemName(item: { seq: number; index?: number | undefined }): string {
  return item.index === undefined ? `seq ${item.seq}` : `seq ${item.seq} #${item.index}`;
}

/** The record a KV entry holds; null for a deletion or anything else. */
export function failureRecordOf(e: KvEntry): FailureRecord | null {
  if (e.operation !== 'PUT' || e.value.length === 0) return null;
  try {
    return e.json<FailureRecord>();
  } catch {
    return null;
  }
}

export async function openFailureLedger(nats: Nats, log: (m: string) => void): Promise<FailureLedger> {
  const kv: KV = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
  const records = new Map<string, { record: FailureRecord; revision: number }>();
  const servers = new Map<string, (key: string) => void>();

  const watch = await watchForever(kv, (e) => {
    const record = failureRecordOf(e);
    if (!record) {
      records.delete(e.key);
      return;
    }
    const seen = records.get(e.key);
    records.set(e.key, { record, revision: e.revision });
    // A watch started again delivers current values again: ask only once per revision.
    if (record.state === 'retry' && seen?.revision !== e.revision) servers.get(record.consumer)?.(e.key);
  }, log, 'failures');

  const claimAndRun = async (key: string, reapply: Reapply, serverLog: (m: string) => void) => {
    const seen = records.get(key);
    if (!seen || seen.record.state !== 'retry') return;
    const claimed = { ...seen.record, state: 'retrying' as const };
    try {
      await kv.update(key, JSON.stringify(claimed), seen.revision);
    } catch {
      return; // another process took it, or it changed meanwhile
    }
    try {
      await reapply(claimed);
      await kv.delete(key);
      serverLog(`${claimed.consumer}: retry of ${itemName(claimed)} (${claimed.subject}) succeeded; failure record removed`);
    } catch (err) {
      const again: FailureRecord = { ...claimed, state: 'skipped', error: describeError(err), attempts: claimed.attempts + 1, retries: (claimed.retries ?? 0) + 1, skipped_at: new Date().toISOString() };
      serverLog(`${claimed.consumer}: retry of ${itemName(claimed)} (${claimed.subject}) failed again: ${again.error}`);
      await kv.put(key, JSON.stringify(again)).catch(() => {});
    }
  };

  return {
    async record(r) {
      await kv.put(failureKey(r.consumer, r.seq, r.index), JSON.stringify({ ...r, state: 'skipped', skipped_at: new Date().toISOString() } satisfies FailureRecord));
    },
    list: () => [...records.values()].map((r) => r.record),
    serveRetries(consumer, reapply, serverLog) {
      // One retry at a time per consumer: reapplying is rare and must not race the live reader's writes.
      let chain = Promise.resolve();
      const enqueue = (key: string) => {
        chain = chain.then(() => claimAndRun(key, reapply, serverLog)).catch(() => {});
      };
      servers.set(consumer, enqueue);
      for (const [key, r] of records) if (r.record.consumer === consumer && r.record.state === 'retry') enqueue(key);
      return () => {
        if (servers.get(consumer) === enqueue) servers.delete(consumer);
      };
    },
    close: () => void watch.stop(),
  };
}
