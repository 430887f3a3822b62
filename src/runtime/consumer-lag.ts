import { Kvm, type KV } from '@nats-io/kv';
import { CONSUMERS, KV_BUCKETS, STREAMS } from '../../streams/definitions.ts';
import type { Db } from '../db/connect.ts';
import { CHECKPOINT_KEY as ROUTER_CHECKPOINT } from '../inbound/router.ts';
import type { Nats } from '../nats/connection.ts';
import type { ProgressBoard } from '../nats/progress-board.ts';
import { within, type StreamInfo } from '../nats/stream-info.ts';
import { CHECKPOINT_KEY as NOTIFIER_CHECKPOINT } from '../notifier/reader.ts';
import { PROJECTOR_LEASE, readCheckpoint } from '../projections/projector.ts';

/** A measurement serves the scrapes of this long: it costs a few JetStream calls and a query. */
const MAX_AGE_MS = 1500;

interface LogReader {
  consumer: string;
  stream: string;
  /** Where the reader resumes after a stop: 0 when it never ran. */
  checkpoint: () => Promise<number>;
}

/**
 * How far behind each consumer of the service is (`jetcron_consumer_lag`), as seen from
 * any one process. A log reader's lag is its stream's last sequence less its position:
 * the live position where a process shares it (this process's own consumers, and those
 * of the other processes of a split `serve`, through the progress board), else its
 * checkpoint (Postgres for the projector, KV `checkpoints` for the others, written every
 * 250 ms), which is where a reader picks up after a stop. So a reader that no process
 * runs is still measured, and its lag grows while events arrive. A work queue's lag is
 * its durable consumer's messages waiting plus those delivered and not yet acknowledged.
 * A reader that has no position at all (a role never started) is left out. The task
 * partition owners (`owner.<p>`) keep no checkpoint: each is measured while a process owns it.
 */
export function createConsumerLag(deps: { nats: Nats; db: Db; board: ProgressBoard; streams: StreamInfo }) {
  let kv: Promise<KV> | undefined;
  const openKv = () =>
    (kv ??= new Kvm(deps.nats.nc).open(KV_BUCKETS.checkpoints.name).catch((err: unknown) => {
      kv = undefined;
      throw err;
    }));
  const kvPosition = (key: string) => async () => {
    const entry = await (await openKv()).get(key);
    return entry?.value.length ? Number(entry.string()) : 0;
  };
  const readers: LogReader[] = [
    { consumer: PROJECTOR_LEASE, stream: STREAMS.events.name, checkpoint: () => readCheckpoint(deps.db) },
    { consumer: NOTIFIER_CHECKPOINT, stream: STREAMS.events.name, checkpoint: kvPosition(NOTIFIER_CHECKPOINT) },
    { consumer: ROUTER_CHECKPOINT, stream: STREAMS.inbound.name, checkpoint: kvPosition(ROUTER_CHECKPOINT) },
  ];
  const queues = [CONSUMERS.notifiers];

  async function readerLag(r: LogReader, live: Map<string, number>): Promise<[{ consumer: string }, number] | null> {
    const [end, saved] = await Promise.all([deps.streams.lastSeq(r.stream), within(r.checkpoint())]);
    const position = Math.max(saved, live.get(r.consumer) ?? 0);
    if (position === 0 && !live.has(r.consumer)) return null;
    return [{ consumer: r.consumer }, Math.max(0, end - position)];
  }

  async function measure(): Promise<Array<[{ consumer: string }, number]>> {
    const active = deps.board.consumers().filter((c) => c.active);
    const live = new Map(active.map((c) => [c.consumer, c.position]));
    // Readers with no checkpoint of their own (the task partition owners): measured while a process runs them.
    const named = new Set(readers.map((r) => r.consumer));
    const liveOnly = active.filter((c) => c.stream && !named.has(c.consumer) && !queues.some((q) => q.durable_name === c.consumer));
    // One that cannot be measured now (a store unreachable) is left out of this scrape, not the others.
    const settled = await Promise.allSettled([
      ...readers.map((r) => readerLag(r, live)),
      ...liveOnly.map(async (c) => [{ consumer: c.consumer }, Math.max(0, (await deps.streams.lastSeq(c.stream!)) - c.position)] as [{ consumer: string }, number]),
      ...queues.map(async (q) => [{ consumer: q.durable_name }, await deps.streams.backlog(q.stream, q.durable_name)] as [{ consumer: string }, number]),
    ]);
    return settled.flatMap((s) => (s.status === 'fulfilled' && s.value ? [s.value] : []));
  }

  let last: { at: number; value: Promise<Array<[{ consumer: string }, number]>> } | undefined;
  return {
    measure(): Promise<Array<[{ consumer: string }, number]>> {
      if (!last || Date.now() - last.at >= MAX_AGE_MS) last = { at: Date.now(), value: measure() };
      return last.value;
    },
  };
}
