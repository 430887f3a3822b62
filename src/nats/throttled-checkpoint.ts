import type { KV } from '@nats-io/kv';

/**
 * A consumer position kept in KV, written at most every `everyMs` plus once after
 * activity stops: a restart replays at most that much, which keyed writes and the
 * streams' dedupe windows absorb.
 */
export async function openCheckpoint(kv: KV, key: string, everyMs: number) {
  const entry = await kv.get(key);
  let done = entry?.value.length ? Number(entry.string()) : 0;
  let saved = done;
  let savedAt = 0;
  let trailing: NodeJS.Timeout | undefined;

  const save = async () => {
    if (done === saved) return;
    const seq = done;
    await kv.put(key, String(seq));
    saved = seq;
    savedAt = Date.now();
  };

  return {
    /** The last sequence recorded as processed. */
    get position() {
      return done;
    },
    async advance(seq: number): Promise<void> {
      done = seq;
      clearTimeout(trailing);
      if (Date.now() - savedAt >= everyMs) await save();
      else trailing = setTimeout(() => void save().catch(() => {}), everyMs);
    },
    async flush(): Promise<void> {
      clearTimeout(trailing);
      await save();
    },
  };
}
