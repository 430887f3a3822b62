import { AckPolicy, DeliverPolicy, type StreamConfig } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { CONSUMERS, KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import type { Nats } from './connection.ts';

function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.code === '404' || /not found/i.test(String(e?.message));
}

/** JETCRON_STREAM_REPLICAS for admin commands (they read no config file); unset = undefined. */
export function replicasFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env.JETCRON_STREAM_REPLICAS);
  return [1, 3, 5].includes(n) ? n : undefined;
}

/**
 * Creates or updates every stream, consumer and bucket; safe to run from many
 * processes at once. `replicas` undefined keeps each existing stream's replica count
 * (1 for a new one), so a process or command started without the setting can never
 * shrink a cluster's streams; a number is applied to every stream and bucket.
 */
export async function applyStreams(nats: Nats, replicas: number | undefined): Promise<void> {
  for (const def of Object.values(STREAMS)) {
    const config = { ...def, subjects: [...def.subjects] } as Partial<StreamConfig> & { name: string };
    try {
      const existing = await nats.jsm.streams.info(def.name);
      await nats.jsm.streams.update(def.name, { ...config, num_replicas: replicas ?? existing.config.num_replicas });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await nats.jsm.streams.add({ ...config, num_replicas: replicas ?? 1 });
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
      num_replicas: replicas ?? 0, // 0: the stream's own
    }).catch(async (err: Error) => {
      if (!/already in use|exists/i.test(err.message)) throw err;
      // An existing durable gets the settings that may change between versions (an upgrade shortened ack_wait).
      const info = await nats.jsm.consumers.info(c.stream, c.durable_name);
      if (info.config.ack_wait !== c.ack_wait || info.config.max_ack_pending !== c.max_ack_pending) {
        await nats.jsm.consumers.update(c.stream, c.durable_name, { ack_wait: c.ack_wait, max_ack_pending: c.max_ack_pending });
      }
    });
  }
  const kvm = new Kvm(nats.nc);
  for (const b of Object.values(KV_BUCKETS)) {
    // An existing bucket keeps its configuration here; only an explicit count changes its replicas.
    await kvm.create(b.name, { history: 1, replicas: replicas ?? 1, ...(b.ttlMs ? { ttl: b.ttlMs } : {}) });
    // ...and a changed TTL (an upgrade that shortened the leases') or an explicit count.
    const info = await nats.jsm.streams.info(`KV_${b.name}`);
    const maxAge = b.ttlMs * 1_000_000;
    const want = { num_replicas: replicas ?? info.config.num_replicas, max_age: maxAge };
    if (info.config.num_replicas !== want.num_replicas || info.config.max_age !== want.max_age) {
      // The server refuses a dedupe window longer than the age limit.
      const window = maxAge && info.config.duplicate_window > maxAge ? { duplicate_window: maxAge } : {};
      await nats.jsm.streams.update(`KV_${b.name}`, { ...info.config, ...want, ...window });
    }
  }
}
