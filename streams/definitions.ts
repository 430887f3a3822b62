/**
 * Every stream, consumer and KV bucket jetcron uses, as plain data. `applyStreams`
 * creates or updates them idempotently at start; docs/architecture.md describes
 * each one and must stay in step with this file.
 */
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';

const SECOND_NS = 1_000_000_000;
const MINUTE_NS = 60 * SECOND_NS;
const DAY_NS = 24 * 60 * MINUTE_NS;

export const STREAMS = {
  /** The event log: the source of truth. One subject per aggregate. */
  events: {
    name: 'EVENTS',
    subjects: ['evt.>'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: 0,
    duplicate_window: 2 * MINUTE_NS,
    max_msg_size: 4 * 1024 * 1024,
    allow_direct: true,
  },
  /**
   * Notification deliveries that are due (one message per notification and channel),
   * written by the notifier's ordered reader, taken by every notifier process through
   * the `notifiers` consumer and removed once delivered or given up.
   */
  notify: {
    name: 'NOTIFY',
    subjects: ['notify.>'],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: 0,
    duplicate_window: 10 * MINUTE_NS,
    max_msg_size: 4 * 1024 * 1024,
  },
  /**
   * The notifier's journal of failure/recovery transitions (`notifier.state`): one
   * message per batch of a loop turn's transitions, read whole when a notifier takes the
   * lease and purged once a compaction has written its entries to KV `notify-state`
   * (src/notifier/state-journal.ts).
   */
  notifyState: {
    name: 'NOTIFY_STATE',
    subjects: ['notifier.state'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: 0,
    duplicate_window: 2 * MINUTE_NS,
    max_msg_size: 4 * 1024 * 1024,
  },
  /**
   * Inbound webhook requests exactly as received (`inbound.<org>.<endpoint>`): a JSON
   * line of metadata, a newline, then the raw body bytes; a group of
   * one loop turn's requests per message, their routes in a header the router reads
   * alone (`src/inbound/stored-request.ts`). The 30-day history of
   * inbound events is this stream's `max_age`: retention is JetStream's job.
   */
  inbound: {
    name: 'INBOUND',
    subjects: ['inbound.>'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: 30 * DAY_NS,
    duplicate_window: 2 * MINUTE_NS,
    max_msg_size: 2 * 1024 * 1024,
    allow_direct: true,
  },
} as const;

export const KV_BUCKETS = {
  /**
   * Single-owner leases: projector, notifier, inbound router, task and monitor partition owners. Entries expire unless
   * renewed: a dead holder's work is taken over within 10 s, while a live holder keeps
   * its lease through a NATS leader election (5–9 s on 2.9) by retrying renewals.
   */
  leases: { name: 'leases', ttlMs: 10_000 },
  /** Progress of consumers that keep their position outside Postgres (the notifier, the inbound router). */
  checkpoints: { name: 'checkpoints', ttlMs: 0 },
  /** Idempotency-Key records, 24 h. */
  idempotency: { name: 'idempotency', ttlMs: 24 * 3_600_000 },
  /**
   * Per-host backoff: one entry per organization + target host (`<org>.<hex of host:port>`),
   * the failure streak and the block end (src/dispatchers/host-blocks.ts). Absent = healthy.
   * The TTL drops entries no attempt has touched for a day (the longest 429 block).
   */
  hostBlocks: { name: 'host-blocks', ttlMs: 24 * 3_600_000 },
  /**
   * Notifier: per source (`<org>.<source id>`), whether it is failing and the EVENTS
   * sequence of the last transition (src/notifier/state.ts), as of the last compaction of
   * stream NOTIFY_STATE (the journal holds what is newer). Absent = not failing.
   */
  notifyState: { name: 'notify-state', ttlMs: 0 },
  /**
   * The notifier's sends (`<notification id>.<channel or chn_ id>`): a try is marked as
   * sending before its request leaves and as ended (with its result) after, so a
   * delivery redelivered after a crash knows whether it was already sent
   * (src/notifier/send-ledger.ts). A day outlives any delivery's tries.
   */
  notifySends: { name: 'notify-sends', ttlMs: 24 * 3_600_000 },
  /** Service-wide settings shared by every process, e.g. the key endpoint secrets are sealed with. */
  config: { name: 'config', ttlMs: 0 },
  /**
   * Items a consumer skipped after failing on them the same way several times
   * (`<consumer>.<stream seq>`, src/nats/failure-ledger.ts): why, and for work-queue
   * jobs the message itself, so `jetcron projections retry` can run them again.
   */
  failures: { name: 'failures', ttlMs: 0 },
} as const;

/**
 * The single-reader consumers that keep their position in KV `checkpoints` (the key is
 * the reader's name) and the stream each reads. The projector keeps its position in
 * Postgres `projection_checkpoints` instead, beside the rows it writes.
 */
export const KV_CHECKPOINT_READERS = {
  notifier: STREAMS.events.name,
  'inbound-router': STREAMS.inbound.name,
} as const;

export const CONSUMERS = {
  /** Shared by every notifier process: notification deliveries (src/notifier/deliverer.ts). */
  notifiers: {
    stream: STREAMS.notify.name,
    durable_name: 'notifiers',
    ack_wait: 15 * SECOND_NS,
    max_ack_pending: 10_000,
    max_deliver: -1,
  },
} as const;


export const DAY = DAY_NS;
