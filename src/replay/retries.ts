import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { describeError, isTransient } from '../lib/transient.ts';
import type { Nats } from '../nats/connection.ts';
import { failureKey, failureRecordOf, itemName, type FailureRecord } from '../nats/failure-ledger.ts';
import type { Picked, ReplayResult } from './projection.ts';

/**
 * A replay's skipped events are tried again by its next run (the contract: "retries of
 * skipped events are applied by the next plain replay"), before anything new, in log
 * order; `jetcron projections retry` marks them too, for a `--follow` replay that is
 * running. A record that succeeds is removed; one that fails again stays, counted.
 */

async function recordsOf(nats: Nats, consumer: string): Promise<Array<{ key: string; record: FailureRecord; revision: number }>> {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
  const out = [];
  for await (const key of await kv.keys(`${failureKey(consumer, 0).replace(/\.0$/, '')}.>`)) {
    const e = await kv.get(key);
    const record = e && failureRecordOf(e);
    if (record && record.consumer === consumer) out.push({ key, record, revision: e.revision });
  }
  return out.sort((a, b) => a.record.seq - b.record.seq || (a.record.index ?? -1) - (b.record.index ?? -1));
}

/** `--from-start`: the projection starts over, and meets those events again in order. */
export async function forgetSkipped(nats: Nats, consumer: string): Promise<void> {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
  for (const { key } of await recordsOf(nats, consumer)) await kv.delete(key);
}

export async function applySkippedAgain(
  deps: { nats: Nats; consumer: string; decode: (data: Uint8Array) => Picked[]; log: (m: string) => void },
  apply: (events: StoredEvent<JetcronEvent>[]) => Promise<void>,
  strict = false,
): Promise<{ skipped: number; stoppedAt?: ReplayResult['stopped_at'] }> {
  const kv = await new Kvm(deps.nats.nc).open(KV_BUCKETS.failures.name);
  let skipped = 0;
  for (const { key, record, revision } of await recordsOf(deps.nats, deps.consumer)) {
    const stored = await deps.nats.jsm.streams.getMessage(STREAMS.events.name, { seq: record.seq }).catch(() => null);
    if (!stored) {
      deps.log(`${deps.consumer}: ${itemName(record)} is no longer in the log; its failure record is removed`);
      await kv.delete(key);
      continue;
    }
    const events = deps.decode(stored.data)
      .map(({ event, index }) => ({ event, seq: stored.seq, subject: stored.subject, index }))
      .filter((e) => record.index === undefined || e.index === record.index);
    try {
      if (events.length) await apply(events);
      await kv.delete(key);
      deps.log(`${deps.consumer}: ${itemName(record)} skipped before is applied now; its failure record is removed`);
    } catch (err) {
      if (isTransient(err)) throw err;
      skipped += Math.max(1, events.length);
      const again: FailureRecord = { ...record, state: 'skipped', error: describeError(err), attempts: record.attempts + 1, retries: (record.retries ?? 0) + 1, skipped_at: new Date().toISOString() };
      await kv.update(key, JSON.stringify(again), revision).catch(() => {});
      deps.log(`ERROR ${deps.consumer}: ${itemName(record)} skipped before fails again: ${again.error}`);
      if (strict) {
        const e = events[0];
        return { skipped, stoppedAt: { seq: record.seq, index: e?.index ?? record.index ?? 0, id: e?.event.id ?? record.event_id ?? '?', type: e?.event.type ?? record.event_type ?? '?', error: again.error } };
      }
    }
  }
  return { skipped };
}
