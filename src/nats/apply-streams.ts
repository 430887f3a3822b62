import { AckPolicy, DeliverPolicy, type StreamConfig } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { CONSUMERS, KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';

function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.code === '404' || /not found/i.test(String(e?.message));
}

/** Creates or updates every stream, consumer and bucket; safe to run from many processes at once. */
export async function applyStreams(nats: Nats, replicas: number): Promise<void> {
  for (const def of Object.values(STREAMS)) {
    const config = { ...def, subjects: [...def.subjects], num_replicas: replicas } as Partial<StreamConfig> & { name: string };
    try {
      await nats.jsm.streams.info(def.name);
      await nats.jsm.streams.update(def.name, config);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await nats.jsm.streams.add(config);
      } catch (addErr) {
        // Another process created it between our info and add.
        if (!/already in use|exists/i.test(String((addErr as Error).message))) throw addErr;
      }
    }
  }
  for (const c of Object.values(CONSUMERS)) {
    await nats.jsm.consumers.add(c.stream, {
      durable_name: c.durable_name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: c.ack_wait,
      max_ack_pending: c.max_ack_pending,
      max_deliver: c.max_deliver,
      num_replicas: replicas,
    }).catch(async (err: Error) => {
      if (!/already in use|exists/i.test(err.message)) throw err;
    });
  }
  const kvm = new Kvm(nats.nc);
  for (const b of Object.values(KV_BUCKETS)) {
    await kvm.create(b.name, { history: 1, replicas, ...(b.ttlMs ? { ttl: b.ttlMs } : {}) });
  }
}
