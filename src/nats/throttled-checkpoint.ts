import type { KV } from '@nats-io/kv';

/**
 * A consumer position kept in KV, written at most every `everyMs` plus once after
 * activity stops: a restart replays at most that much, which keyed writes and the
 * streams' dedupe windows absorb. One write is on its way at a time: a reader advances
 * after every batch, and under load batches come faster than a put is answered (each
 * advance made another put while one was waiting, and the reader waited for each).
 */
export async function openCheckpoint(kv: KV, key: string, everyMs: number) {
  const entry = await kv.get(key);
  let done = entry?.value.length ? Number(entry.string()) : 0;
  let saved = done;
  let savedAt = 0;
  let trailing: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  let closed = false;

  const write = (): Promise<void> => {
    if (writing) return writing;
    if (done === saved) return Promise.resolve();
    const seq = done;
    writing = kv.put(key, String(seq)).then(
      () => {
        saved = seq;
        savedAt = Date.now();
      },
    ).finally(() => {
      writing = undefined;
      // What came while it was on its way goes in the next write, at the pace above.
      if (done !== saved) schedule();
    });
    return writing;
  };

  function schedule(): void {
    if (trailing || writing || closed) return;
    const wait = everyMs - (Date.now() - savedAt);
    if (wait <= 0) void write().catch(() => {});
    else trailing = setTimeout(() => {
      trailing = undefined;
      void write().catch(() => {});
    }, wait);
  }

  return {
    /** The last sequence recorded as processed. */
    get position() {
      return done;
    },
    /** Records `seq` as processed; stored at the pace above, never waited for here. */
    advance(seq: number): Promise<void> {
      done = seq;
      schedule();
      return Promise.resolve();
    },
    /** Stores the last position now (after any write on its way), the last write of this term. */
    async close(): Promise<void> {
      closed = true;
      clearTimeout(trailing);
      trailing = undefined;
      await writing?.catch(() => {});
      await write();
    },
  };
}
