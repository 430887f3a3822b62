import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import { generationalMap } from '../lib/bounded-map.ts';
import { readUntilDone } from '../lib/read-until-done.ts';
import { createTurnGroups } from '../lib/turn-groups.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { readRange } from '../nats/range-reader.ts';
import { STATE_CACHE_SIZE, stateKey, type CachedNotifyState, type NotifyStateStore, type SourceState } from './state.ts';

/**
 * One source's state as the notifier last decided it. `s` null: forgotten (deleted).
 * `b`: the per-key store (KV `notify-state`) may hold an entry for the key, so a
 * compaction must write this one over it; false: it holds none (the source was created
 * in view, or a read found nothing), and a state that is not failing needs no write.
 */
export interface JournalEntry {
  k: string;
  s: SourceState | null;
  b: boolean;
}

/** Where a lease term's transitions are made durable, a batch per message (stream NOTIFY_STATE). */
export interface StateJournal {
  /** Resolves with the batch's position once stored. */
  append(entries: JournalEntry[]): Promise<number>;
  /** Every batch still kept, oldest first; the position of the last read (0: none). */
  load(signal: AbortSignal): Promise<{ batches: JournalEntry[][]; last: number }>;
  /** Drops every batch through `position`: their entries are in the per-key store now. */
  truncate(position: number): Promise<void>;
}

export interface JournaledStateOptions {
  /** Sources the cache keeps at least (see `STATE_CACHE_SIZE`). */
  cacheSize: number;
  /** Entries waiting for the per-key store past which a compaction starts (memory). */
  pendingMax: number;
  /** Journal entries past which a compaction starts (the length of a takeover's load). */
  journalMax: number;
  /** A batch holds at most this many entries (a message's size). */
  batchMax: number;
  log: (m: string) => void;
  /** The lease term's end: no compaction starts or truncates after it. */
  signal: AbortSignal;
}

export const JOURNAL_DEFAULTS = { cacheSize: STATE_CACHE_SIZE, pendingMax: 50_000, journalMax: 200_000, batchMax: 2_000 } as const;

/**
 * The notifier's state for one lease term: memory first, a journal for durability, the
 * per-key KV store underneath.
 *
 * A transition is decided in memory and made durable as one entry of a journal batch:
 * the transitions decided in one loop turn share one message (an outage's end recovers
 * thousands of sources at once; one KV write each cost the notifier's process ~24 µs
 * and nats-server ~18 µs a recovery, docs/failure-recovery.md). The term starts by
 * loading the journal; what it does not name is read from the per-key store when it
 * first matters, as before. A compaction writes to the per-key store only what must be
 * there (failing sources, and what overrides an entry it may hold) and truncates the
 * journal, so memory and a takeover's load stay bounded: a source that failed and
 * recovered in view of the journal never costs a per-key write.
 *
 * Memory changes only once a batch is stored: the keyed reader runs a source's next
 * event after its transition's `put` resolved, so `peek` never answers a state that a
 * crash could lose.
 */
export function journaledNotifyState(base: NotifyStateStore, journal: StateJournal, opts: JournaledStateOptions): CachedNotifyState & {
  /** Resolves once the journal is loaded (every read waits for it). */
  ready: Promise<void>;
  /** The compaction running now, if any (tests). */
  compaction(): Promise<void> | undefined;
  /** Starts a compaction now unless one runs (tests); resolves when it ends. */
  compactNow(): Promise<void>;
  /** Entries waiting for the per-key store. */
  readonly pending: number;
} {
  const cache = generationalMap<JournalEntry>(opts.cacheSize);
  /** Entries the per-key store does not hold yet and must (`needsWrite`): never evicted. */
  const unwritten = new Map<string, JournalEntry>();
  let journalEntries = 0;
  /** The position of the last batch stored: a compaction truncates through it. */
  let lastStored = 0;
  let compacting: Promise<void> | undefined;
  /** Until the journal is read, nothing is known (`peek` answers undefined: the event goes to its chain, which waits). */
  let loaded = false;

  const needsWrite = (e: JournalEntry) => e.b || (e.s?.failing ?? false);
  // The cache first: it holds every entry `unwritten` does unless evicted, never an older one.
  const known = (key: string) => cache.get(key) ?? unwritten.get(key);
  const apply = (e: JournalEntry) => {
    cache.set(e.k, e);
    if (needsWrite(e)) unwritten.set(e.k, e);
    else unwritten.delete(e.k);
  };

  const ready = (async () => {
    // Tried again until it answers: every event waits, as deciding without it would announce again.
    const { batches, last } = await readUntilDone('the journal', () => journal.load(opts.signal), opts.signal, (m) => opts.log(`notifier state: ${m}`));
    for (const batch of batches) {
      for (const e of batch) {
        const prev = known(e.k)?.s;
        // A frozen holder's late batch may come after a newer one: the later event wins.
        if (e.s && prev && prev.seq > e.s.seq) continue;
        apply(e);
        journalEntries++;
      }
    }
    lastStored = last;
    loaded = true;
    maybeCompact();
  })();
  // Fails only when the term ends; reads then fail with it.
  ready.catch(() => {});

  // The transitions of one loop turn, one batch: known once it is stored, then their puts resolve.
  const turns = createTurnGroups<JournalEntry>({ maxCount: opts.batchMax, maxBytes: Infinity }, () => '', async (batch) => {
    const position = await journal.append(batch.items);
    lastStored = Math.max(lastStored, position);
    for (const e of batch.items) apply(e);
    journalEntries += batch.items.length;
    maybeCompact();
    return position;
  });
  const record = async (entry: JournalEntry) => {
    const batch = turns.join('');
    batch.items.push(entry);
    batch.count++;
    await batch.stored;
  };

  function maybeCompact(): void {
    if (unwritten.size >= opts.pendingMax || journalEntries >= opts.journalMax) startCompaction();
  }
  function startCompaction(): Promise<void> {
    if (compacting || opts.signal.aborted) return compacting ?? Promise.resolve();
    return compacting = compact().catch((err: unknown) => {
      opts.log(`notifier state: compaction failed (tried again at the next transition): ${(err as Error).message}`);
    }).finally(() => {
      compacting = undefined;
    });
  }

  /**
   * Writes what the per-key store lacks, then truncates the journal through the last
   * batch stored before: every entry of those batches is either written now or replaced
   * by a newer one written now. A batch stored after is kept (its entries are applied
   * in memory only once stored, so they are not among those written).
   */
  async function compact(): Promise<void> {
    const through = lastStored;
    const entries = [...unwritten.values()];
    const counted = journalEntries;
    for (let i = 0; i < entries.length; i += 500) {
      await Promise.all(entries.slice(i, i + 500).map((e) => {
        const [orgId, sourceId] = splitKey(e.k);
        return e.s ? base.put(orgId, sourceId, e.s) : base.forget(orgId, sourceId);
      }));
      if (opts.signal.aborted) return;
    }
    await journal.truncate(through);
    for (const e of entries) {
      if (unwritten.get(e.k) !== e) continue; // changed meanwhile: the newer entry waits for the next compaction
      unwritten.delete(e.k);
      cache.set(e.k, { ...e, b: true });
    }
    journalEntries = Math.max(0, journalEntries - counted);
    opts.log(`notifier state: ${entries.length} written to the per-key store, journal truncated through ${through}`);
  }

  return {
    ready,
    compaction: () => compacting,
    compactNow: () => ready.then(startCompaction),
    get pending() {
      return unwritten.size;
    },
    async get(orgId, sourceId) {
      await ready;
      const key = stateKey(orgId, sourceId);
      const k = known(key);
      if (k) return k.s;
      const state = await base.get(orgId, sourceId);
      // An entry that came meanwhile is newer than the store's copy.
      const meanwhile = known(key);
      if (meanwhile) return meanwhile.s;
      cache.set(key, { k: key, s: state, b: state !== null });
      return state;
    },
    async put(orgId, sourceId, state) {
      await ready;
      const key = stateKey(orgId, sourceId);
      await record({ k: key, s: state, b: known(key)?.b ?? true });
    },
    async forget(orgId, sourceId) {
      await ready;
      const key = stateKey(orgId, sourceId);
      await record({ k: key, s: null, b: known(key)?.b ?? true });
    },
    created(orgId, sourceId) {
      const key = stateKey(orgId, sourceId);
      if (!known(key)) cache.set(key, { k: key, s: null, b: false });
    },
    peek(orgId, sourceId) {
      return loaded ? known(stateKey(orgId, sourceId))?.s : undefined;
    },
  };
}

/** `<org>.<source id>`: ids hold no dots. */
function splitKey(key: string): [string, string] {
  const dot = key.indexOf('.');
  return [key.slice(0, dot), key.slice(dot + 1)];
}

/** The journal on stream NOTIFY_STATE: a batch per message, truncated by purging. */
export function openStateJournal(nats: Nats, log: (m: string) => void): StateJournal {
  const stream = STREAMS.notifyState.name;
  return {
    append: (entries) => nats.publish(SUBJECTS.notifyStateJournal, encodeJson(entries), { traceparent: undefined }),
    async load(signal) {
      const { state } = await nats.jsm.streams.info(stream);
      const batches: JournalEntry[][] = [];
      if (!state.messages) return { batches, last: state.last_seq };
      const range = readRange(nats, { stream, startSeq: state.first_seq, endSeq: state.last_seq, signal, log, name: 'notifier state journal' });
      for await (const items of range) for (const item of items) batches.push(decodeJson<JournalEntry[]>(item.data));
      return { batches, last: state.last_seq };
    },
    async truncate(position) {
      await nats.jsm.streams.purge(stream, { seq: position + 1 });
    },
  };
}
