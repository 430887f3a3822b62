import { Kvm, type KV } from '@nats-io/kv';
import { KV_BUCKETS, type KV_CHECKPOINT_READERS } from '../../streams/definitions.ts';
import type { StoredEvent } from '../commands/envelope.ts';
import type { JetcronEvent } from '../commands/events.ts';
import { inSpan, SpanKind } from '../telemetry/tracing.ts';
import type { Nats } from './connection.ts';
import { readEventsKeyed } from './keyed-event-reader.ts';
import { createLease, openLeaseBucket, whileLeased, type Lease } from './lease.ts';
import type { Supervisor } from './supervisor.ts';

/** What every consumer of a process shares: the connection, the process's name in leases, its log and supervisor. */
export interface ConsumerHost {
  nats: Nats;
  owner: string;
  log: (m: string) => void;
  supervisor: Supervisor;
}

/**
 * A consumer as data. The kit holds its lease and runs one term at a time while the
 * lease holds (a term ends when the lease is lost, it fails, or the consumer stops;
 * then the lease is released and taken again); what a term reads, where it keeps its
 * place and what it does are the consumer's.
 */
export interface LeasedConsumer<R = void> {
  /** The lease: one holder across the service. */
  lease: string;
  /** What it opens once, before its first term (buckets, stores). */
  open?: () => Promise<R>;
  /** One lease term: works until `signal` aborts. */
  term: (signal: AbortSignal, opened: R, lease: Lease) => Promise<void>;
}

/** Starts consumers (each with its own lease: a reader, or one per partition); `stop` ends every term and waits for it. */
export function startConsumers(host: Pick<ConsumerHost, 'nats' | 'owner' | 'log'>, consumers: LeasedConsumer<any>[]): { stop(): Promise<void> } {
  const abort = new AbortController();
  const done = (async () => {
    const bucket = await openLeaseBucket(host.nats);
    await Promise.all(consumers.map(async (c) => {
      const opened = c.open ? await c.open() : undefined;
      const lease = createLease(bucket, c.lease, host.owner, host.log);
      await whileLeased(lease, abort.signal, host.log, (signal) => c.term(signal, opened, lease));
    }));
  })();
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}

/** What a keyed reader does with each event in one lease term. */
export interface KeyedHandlers {
  /** Same key: in order; different keys: at once. */
  keyOf: (e: StoredEvent<JetcronEvent>) => string;
  handle: (e: StoredEvent<JetcronEvent>) => Promise<void>;
  /** Events it has nothing to do with: passed in order, without a chain. */
  skip?: (e: StoredEvent<JetcronEvent>) => boolean;
  /**
   * Decides an event at once when nothing of its key is in flight (so what it reads is
   * current), without a span: true when that was all there was to do; false sends it
   * down its key's chain to `handle`; a promise is what is left to do (a write), which
   * the key's chain waits for, and which `handle` replaces if it fails. Must not throw.
   */
  settle?: (e: StoredEvent<JetcronEvent>) => boolean | Promise<void>;
}

/**
 * A keyed reader of EVENTS declared as data (the notifier reader): its name is
 * its lease, its KV checkpoint's key and its name in the failure ledger; `handlers`
 * are built afresh each term (another holder may have written meanwhile); each event's
 * handling continues the trace of whoever appended it, in a span `<span> <type>`.
 */
export interface KeyedEventConsumer<R> {
  name: keyof typeof KV_CHECKPOINT_READERS;
  checkpointEveryMs: number;
  span: string;
  open?: () => Promise<R>;
  /** `signal`: the term's end. */
  handlers: (opened: R, signal: AbortSignal) => KeyedHandlers;
}

export function keyedEventConsumer<R>(host: ConsumerHost, spec: KeyedEventConsumer<R>): LeasedConsumer<{ kv: KV; opened: R }> {
  return {
    lease: spec.name,
    open: async () => ({
      kv: await new Kvm(host.nats.nc).open(KV_BUCKETS.checkpoints.name),
      opened: spec.open ? await spec.open() : (undefined as R),
    }),
    term: (signal, { kv, opened }) => {
      const h = spec.handlers(opened, signal);
      return readEventsKeyed({
        nats: host.nats,
        kv,
        name: spec.name,
        checkpointKey: spec.name,
        checkpointEveryMs: spec.checkpointEveryMs,
        signal,
        log: host.log,
        supervisor: host.supervisor,
        keyOf: h.keyOf,
        ...(h.skip ? { skip: h.skip } : {}),
        ...(h.settle ? { settle: h.settle } : {}),
        handle: (e) => inSpan(`${spec.span} ${e.event.type}`, {
          kind: SpanKind.CONSUMER, traceparent: e.traceparent, continueOnly: true,
          attributes: () => ({ 'jetcron.org_id': e.event.org_id, 'jetcron.event_id': e.event.id, 'messaging.system': 'nats', 'messaging.destination.name': e.subject }),
        }, () => h.handle(e)),
      });
    },
  };
}
