import { Kvm } from '@nats-io/kv';
import { KV_BUCKETS } from '../../streams/definitions.ts';
import type { Nats } from '../nats/connection.ts';
import { failureRecordOf, type FailureRecord } from '../nats/failure-ledger.ts';

/**
 * `jetcron projections failures` and `jetcron projections retry`: what consumers
 * skipped after failing on it repeatedly, and asking them to run it again. The retry
 * itself happens in the process that runs the consumer (it watches KV `failures`);
 * this command marks the records and waits for each to be removed (succeeded) or
 * marked skipped again (failed again). A record of one event of a commit shows its
 * `index`, `event_id` and `event_type`; its retry applies that event alone.
 */

async function readAll(nats: Nats): Promise<Array<{ key: string; record: FailureRecord; revision: number }>> {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
  const out = [];
  for await (const key of await kv.keys()) {
    const e = await kv.get(key);
    const record = e && failureRecordOf(e);
    if (record) out.push({ key, record, revision: e.revision });
  }
  return out.sort((a, b) => a.record.consumer.localeCompare(b.record.consumer) || a.record.seq - b.record.seq || (a.record.index ?? -1) - (b.record.index ?? -1));
}

const shown = ({ payload, ...rest }: FailureRecord) => ({ ...rest, ...(payload ? { payload_bytes: Buffer.from(payload, 'base64').length } : {}) });

export async function listFailures(nats: Nats, print: (o: unknown) => void, filter: { consumer?: string }): Promise<void> {
  for (const { record } of await readAll(nats)) if (!filter.consumer || record.consumer === filter.consumer) print(shown(record));
}

/** Consumers of `jetcron replay` (`replay.<schema>.<projection>`). */
const REPLAY_PREFIX = 'replay.';

export async function retryFailures(
  nats: Nats,
  print: (o: unknown) => void,
  filter: { consumer?: string; seq?: number; index?: number | undefined },
  waitMs: number,
): Promise<{ failed: number }> {
  const kv = await new Kvm(nats.nc).open(KV_BUCKETS.failures.name);
  const chosen = (await readAll(nats)).filter(({ record }) =>
    record.state === 'skipped' && (!filter.consumer || record.consumer === filter.consumer) && (filter.seq === undefined || record.seq === filter.seq) && (filter.index === undefined || record.index === filter.index));
  const asked = new Map<string, FailureRecord>();
  for (const { key, record, revision } of chosen) {
    try {
      await kv.update(key, JSON.stringify({ ...record, state: 'retry' }), revision);
      asked.set(key, record);
    } catch {
      // changed meanwhile (another retry): leave it
    }
  }
  const deadline = Date.now() + waitMs;
  const outcome = new Map<string, 'succeeded' | 'failed again'>();
  while (outcome.size < asked.size && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    for (const [key, record] of asked) {
      if (outcome.has(key)) continue;
      const e = await kv.get(key);
      const now = e && failureRecordOf(e);
      if (!now) outcome.set(key, 'succeeded');
      else if (now.state === 'skipped') outcome.set(key, 'failed again');
    }
  }
  let failed = 0;
  for (const [key, record] of asked) {
    const result = outcome.get(key) ?? 'pending';
    // A replay's records wait for its next run, which applies them first: asked for, not failed.
    const replay = record.consumer.startsWith(REPLAY_PREFIX);
    if (result !== 'succeeded' && !(replay && result === 'pending')) failed++;
    const entry = result === 'failed again' ? await kv.get(key) : null;
    const now = entry ? failureRecordOf(entry) : null;
    print({ consumer: record.consumer, seq: record.seq, ...(record.index === undefined ? {} : { index: record.index, event_id: record.event_id }), subject: record.subject, result, ...(now ? { error: now.error } : {}),
      ...(result === 'pending' ? { note: replay
        ? 'no --follow replay of this projection is running; the next `jetcron replay` of it applies it (before anything new)'
        : 'no running process serving this consumer took it yet; it stays asked for and runs when one does' } : {}) });
  }
  if (asked.size === 0) print({ retried: 0, note: 'no skipped items match' });
  return { failed };
}
